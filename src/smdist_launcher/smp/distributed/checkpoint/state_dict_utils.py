"""``torch.sagemaker.distributed.checkpoint.state_dict_utils`` (``sm_state_dict_type``, ``SMStateDictType``,
``init_optim_state``): SMP's local (per-rank) checkpoints. Not provided: the import fails with what to use."""
raise ImportError("torch.sagemaker.distributed.checkpoint.state_dict_utils (SMP local checkpoints) is not implemented "
                  "by smdist-launcher; use torch.sagemaker.distributed.fsdp.checkpoint.save_model_checkpoint / "
                  "load_model_checkpoint, or torch.distributed.checkpoint.state_dict.get_state_dict / set_state_dict "
                  "with torch.sagemaker.distributed.checkpoint.state_dict_saver / state_dict_loader")
