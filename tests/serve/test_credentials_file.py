"""serve's profile written into a shared credentials file (serve/credentials_file.py): every other profile reads the
same through botocore's own parser afterwards, every other line is kept byte for byte, the old file is backed up, the
new one is 0600; a file botocore cannot read is left alone."""
from __future__ import annotations

from pathlib import Path

import pytest
from botocore.configloader import raw_config_parse

from smdist_launcher.serve.auth import KeyPair
from smdist_launcher.serve.credentials_file import backup_path, write_profile

KEYS = KeyPair("SMDSNEWKEY0000000000", "n" * 40)
SERVE = {"aws_access_key_id": KEYS.access_key, "aws_secret_access_key": KEYS.secret_key}

NEW = f"[smdist-serve]\naws_access_key_id = {KEYS.access_key}\naws_secret_access_key = {KEYS.secret_key}\n"
DEFAULT = "[default]\naws_access_key_id = REALKEY\naws_secret_access_key = REALSECRET\n"
LAYOUTS = {  # the file before → after
    # a header with an inline comment (configparser and botocore read it as [default]) after serve's old profile
    "inline comment": (
        "[smdist-serve]\naws_access_key_id = OLD\naws_secret_access_key = OLDSECRET\n\n# the main account\n"
        + DEFAULT.replace("[default]", "[default] ; main"),
        NEW + "\n# the main account\n" + DEFAULT.replace("[default]", "[default] ; main")),
    # serve's own header with a comment; before it an indented continuation line that only looks like a header
    "commented own header": (
        DEFAULT + "note = first\n  [smdist-serve]\n[smdist-serve]   # serve's\naws_access_key_id = OLD\n"
                  "[work]\naws_access_key_id = W",
        DEFAULT + "note = first\n  [smdist-serve]\n" + NEW + "[work]\naws_access_key_id = W"),
    "no profile of serve yet, CRLF": (
        "; keys\r\n" + DEFAULT.replace("\n", "\r\n"),
        "; keys\r\n" + DEFAULT.replace("\n", "\r\n") + "\r\n" + NEW.replace("\n", "\r\n")),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_profile_is_written_and_nothing_else_changes(tmp_path: Path, layout: str) -> None:
    old, new = LAYOUTS[layout]
    path = tmp_path / "credentials"
    path.write_bytes(old.encode())
    before = raw_config_parse(str(path))
    write_profile(path, "smdist-serve", KEYS)
    assert path.read_bytes() == new.encode()  # every other line byte for byte
    after = raw_config_parse(str(path))
    assert after.pop("smdist-serve") == SERVE
    before.pop("smdist-serve", None)
    assert after == before and after["default"]["aws_access_key_id"] == "REALKEY"
    assert backup_path(path).read_bytes() == old.encode()
    assert path.stat().st_mode & 0o777 == 0o600 and backup_path(path).stat().st_mode & 0o777 == 0o600
    write_profile(path, "smdist-serve", KEYS)  # again (the next start): the same file
    assert path.read_bytes() == new.encode()


def test_a_file_botocore_cannot_read_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "credentials"
    text = b"[default]\naws_access_key_id = A\n[default]\naws_access_key_id = B\n"  # a duplicate section
    path.write_bytes(text)
    with pytest.raises(ValueError, match="cannot be read as an AWS credentials file"):
        write_profile(path, "smdist-serve", KEYS)
    assert path.read_bytes() == text and not backup_path(path).exists()


def test_a_new_file_is_private_from_its_first_byte(tmp_path: Path) -> None:
    path = tmp_path / "aws" / "credentials"
    write_profile(path, "smdist-serve", KEYS)
    assert raw_config_parse(str(path)) == {"smdist-serve": SERVE}
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700


def test_a_linked_file_is_edited_where_it_lives(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "credentials"
    real.parent.mkdir()
    real.write_text(DEFAULT)
    link = tmp_path / "credentials"
    link.symlink_to(real)
    write_profile(link, "smdist-serve", KEYS)
    assert link.is_symlink() and real.read_text() == DEFAULT + "\n" + NEW


def test_a_profile_holding_the_users_own_keys_is_not_overwritten(tmp_path: Path) -> None:
    """`--profile default`: the user's real keys would be replaced, kept only in the backup, which the next start
    overwrote with serve's key."""
    path = tmp_path / "credentials"
    path.write_text(DEFAULT)
    with pytest.raises(ValueError, match=r"holds other credentials"):
        write_profile(path, "default", KEYS)
    assert path.read_text() == DEFAULT and not backup_path(path).exists()
    write_profile(path, "mine", KEYS)  # a profile serve wrote (its key id) is serve's to replace
    write_profile(path, "mine", KeyPair("SMDSOTHERKEY00000000", "o" * 40))
    assert raw_config_parse(str(path))["default"]["aws_access_key_id"] == "REALKEY"


def test_a_file_that_does_not_parse_is_not_quoted_in_the_error(tmp_path: Path) -> None:
    """configparser's message quotes the offending line: a secret, or /etc/shadow's first line through a link."""
    path = tmp_path / "credentials"
    path.write_text("root:$6$SECRETHASH:19000:0:99999:7:::\n")
    with pytest.raises(ValueError, match="cannot be read as an AWS credentials file") as info:
        write_profile(path, "smdist-serve", KEYS)
    assert "SECRETHASH" not in str(info.value)
    path.write_text(DEFAULT + "aws_secret_access_key SECRETVALUE\n")  # a line that is no option
    with pytest.raises(ValueError, match="cannot be read as an AWS credentials file") as info:
        write_profile(path, "smdist-serve", KEYS)
    assert "SECRETVALUE" not in str(info.value)
