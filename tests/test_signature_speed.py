"""bench.signature_speed reads a BEAM chat's stored texts cold, times their signatures and prints a
digest that two commits reading claims alike share."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_samples import write_beam

from bench import signature_speed


def test_it_times_every_texts_signature_and_prints_the_same_digest_each_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beam = write_beam(tmp_path)
    texts = signature_speed.texts_of(beam, 1)
    assert texts and len(texts) == len(set(texts))
    assert signature_speed.main(["--beam", str(beam), "--conversations", "1", "--rounds", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(texts)} texts" in printed and "median of 2" in printed
    digest = printed.split("digest: ")[1].strip()
    assert len(digest) == 64
    signature_speed.main(["--beam", str(beam), "--conversations", "1", "--rounds", "1"])
    assert capsys.readouterr().out.split("digest: ")[1].strip() == digest
