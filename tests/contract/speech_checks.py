"""Checks the speech-model contract modules share: a folder job's texts, and audio too long for the
served context sent whole (vLLM's 400) and through the preset (pieces)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import vllm_tasks as vt

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX, NUMBERS, LONG = AUDIO / "fox.wav", AUDIO / "numbers.wav", AUDIO / "long45.wav"


def transcribe_dir_gives(base_url: str, expected: dict[str, str], tmp_path: Path) -> None:
    """``transcribe_dir`` over fox.wav and numbers.wav writes ``expected["fox"]``/``["numbers"]`` as its
    JSON and text outputs."""
    source, out = tmp_path / "calls", tmp_path / "text"
    source.mkdir()
    for path in (FOX, NUMBERS):
        (source / path.name).write_bytes(path.read_bytes())
    report = vt.transcribe_dir(
        base_url, source, out, formats=["json", "txt"], params=vt.TranscribeParams(language="en")
    )
    assert report.complete and report.units_sent == 2
    for name in ("fox", "numbers"):
        assert json.loads((out / f"{name}.json").read_text())["text"].strip() == expected[name]
        assert (out / f"{name}.txt").read_text().strip() == expected[name]


def over_the_context_goes_in_pieces(client: vt.Client, tmp_path: Path, *, copies: int, pieces: int) -> None:
    """``copies`` of long45.wav sent whole exceed the fixture's context (vLLM's 400); the preset's
    ``transcribe`` sends what fits whole, the rest in at least ``pieces`` requests, and succeeds."""
    samples, rate = sf.read(LONG, dtype="float32")
    path = tmp_path / f"long{copies}x45.wav"
    sf.write(path, np.concatenate([samples] * copies), rate)
    with pytest.raises(vt.BadRequestError, match=r"maximum (model|context) length"):
        client.transcribe(path, language="en", chunking="server")
    result = client.transcribe(path, language="en")
    assert result.requests >= pieces and result.text
