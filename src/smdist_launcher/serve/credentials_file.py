"""serve's key as a named profile in the user's shared AWS credentials file, edited the way botocore reads it.

botocore reads the file with `configparser.RawConfigParser` (`botocore.configloader.raw_config_parse`), so a section
header is whatever configparser takes for one: `[default] ; main` is the profile `default`, an indented `[x]` after an
option is part of that option's value. The edit finds the profile's lines with those same rules, replaces only them
(every other byte of the file stays as it was), then parses the old and new text with configparser and writes nothing
unless every other profile reads exactly as before. The old file is kept beside it (`<name>.bak`, 0600) and the new
one replaces it atomically, 0600 from its first byte."""
from __future__ import annotations

import configparser
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from .auth import DEFAULT_PROFILE, KEY_PREFIX, KeyPair

_PROFILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_COMMENT_PREFIXES = ("#", ";")  # configparser's defaults, which botocore keeps (no inline comment prefixes)


def credentials_file(environ: Mapping[str, str]) -> Path:
    """Where boto3 reads shared credentials: $AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials."""
    return Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials").expanduser()


def backup_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.bak")


def _section_headers(lines: list[str]) -> list[tuple[int, str]]:
    """(line index, section name) of each header, decided line by line as `RawConfigParser._read` decides it."""
    headers: list[tuple[int, str]] = []
    in_section, option, indent_level = False, False, 0
    for index, line in enumerate(lines):
        value = "" if line.strip().startswith(_COMMENT_PREFIXES) else line.strip()
        if not value:
            continue  # blank and comment lines: values may go on across them (empty_lines_in_values)
        indent = len(line) - len(line.lstrip())
        if in_section and option and indent > indent_level:
            continue  # a continuation of the option above, whatever it looks like
        indent_level = indent
        header = configparser.RawConfigParser.SECTCRE.match(value)
        if header:
            headers.append((index, header.group("header")))
            in_section, option = True, False
        elif in_section:
            option = bool(configparser.RawConfigParser.OPTCRE.match(value))
    return headers


def _parsed(text: str, where: Path) -> dict[str, dict[str, str]]:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=str(where))
    except configparser.Error as e:
        # configparser's message quotes the offending line, which may be a secret (or, through a link, /etc/shadow's
        # first line): only the kind of error and where
        errors = getattr(e, "errors", None)
        line = getattr(e, "lineno", None) or (errors[0][0] if errors else "?")
        raise ValueError(f"{where} cannot be read as an AWS credentials file ({type(e).__name__} at line {line}); "
                         "serve leaves it alone: fix it, or give serve another file with AWS_SHARED_CREDENTIALS_FILE"
                         ) from None
    # botocore reads each profile with [DEFAULT]'s options merged in, as configparser gives them
    sections = {name: dict(parser.items(name, raw=True)) for name in parser.sections()}
    return {**sections, configparser.DEFAULTSECT: dict(parser.defaults())}


def with_profile(text: str, profile: str, keys: KeyPair) -> str:
    """`text` with `[profile]` holding `keys`: the profile's old lines replaced where they were, else the section
    added at the end; nothing else changed."""
    newline = "\r\n" if "\r\n" in text else "\n"
    section = [f"[{profile}]{newline}", f"aws_access_key_id = {keys.access_key}{newline}",
               f"aws_secret_access_key = {keys.secret_key}{newline}"]
    lines = text.splitlines(keepends=True)
    headers = _section_headers(lines)
    ours = [i for i, (_, name) in enumerate(headers) if name == profile]
    if not ours:
        kept = lines[:]
        if kept and not kept[-1].endswith(("\n", "\r")):
            kept[-1] += newline
        if kept and kept[-1].strip():
            kept.append(newline)
        return "".join(kept + section)
    first = headers[ours[0]][0]
    end = headers[ours[0] + 1][0] if ours[0] + 1 < len(headers) else len(lines)
    # comment and blank lines just above the next header describe that section: they stay
    while end > first + 1 and (not lines[end - 1].strip() or lines[end - 1].strip().startswith(_COMMENT_PREFIXES)):
        end -= 1
    return "".join(lines[:first] + section + lines[end:])


def write_profile(path: Path, profile: str, keys: KeyPair) -> None:
    """Put `[profile]` with the pair into the credentials file at `path` (a link: the file it names), keeping every
    other profile and comment; the old file is copied to `<name>.bak` first. ValueError, and the file untouched, when
    the file does not parse or the edit would change anything but the profile."""
    if not _PROFILE_NAME.fullmatch(profile):
        raise ValueError(f"profile: {profile!r} is not a usable profile name (letters, digits, '.', '_', '-')")
    path = path.resolve() if path.is_symlink() else path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    old_bytes = path.read_bytes() if path.exists() else None
    old = _text_of(old_bytes, path) if old_bytes is not None else ""
    new = with_profile(old, profile, keys)
    before, after = _parsed(old, path), _parsed(new, path)
    replaced = before.pop(profile, {}).get("aws_access_key_id")
    if replaced not in (None, keys.access_key) and profile != DEFAULT_PROFILE and not replaced.startswith(KEY_PREFIX):
        # --profile default (or any profile of the user's): their real keys would be gone, and from the backup too at
        # the next start
        raise ValueError(f"{path}: profile [{profile}] holds other credentials (key id {replaced[:4]}...), not a key "
                         "serve made; serve leaves it alone: give serve another --profile")
    written = after.pop(profile, {})
    if before != after or (written.get("aws_access_key_id"), written.get("aws_secret_access_key")) != (
            keys.access_key, keys.secret_key):
        raise ValueError(f"{path}: adding profile [{profile}] would change other profiles of the file, so serve "
                         "leaves it alone: give serve another file with AWS_SHARED_CREDENTIALS_FILE")
    if old_bytes is not None:
        _write_private(backup_path(path), old_bytes)
    _write_private(path, new.encode())


def _text_of(data: bytes, path: Path) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; serve leaves it alone: give serve another file with "
                         "AWS_SHARED_CREDENTIALS_FILE") from None


def _write_private(path: Path, data: bytes) -> None:
    """`data` into `path`, replaced atomically (a reader never sees half of it), 0600 from the first byte."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
