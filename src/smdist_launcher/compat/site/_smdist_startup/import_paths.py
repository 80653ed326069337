"""SageMaker's import paths (``torch.sagemaker``, ``smdistributed.*``) resolve to smdist_launcher's modules."""


def install_import_paths() -> None:
    try:
        from _smdist_path import ensure_importable

        ensure_importable()
        from smdist_launcher.compat.aliases import install
    except ImportError:  # smdist-launcher not importable here: leave the interpreter as it was
        return
    install()
