"""A recording over vLLM's 600 s upload limit (11.6 minutes) against FakeVLLM configured like the `stt`
fixture, which refuses such an upload as vLLM does (tests/contract/test_stt.py holds the real server to
that wording): the client splits it into pieces under the limit, sends them, and puts their texts and
timings back together in order, streamed or not. Each piece answers text naming it
(``tests.fakes.piece_transcript``), so what is lost, doubled or out of order shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import vllm_tasks as vt
from vllm_tasks.testing.content import audio_seconds

from ..fakes import fake_like, piece_transcript

TOO_LONG = r"exceeds maximum allowed duration of 600s \(file contains 696\.1s at 16000Hz\)"
LONG = Path(__file__).resolve().parents[1] / "data" / "audio" / "long45.wav"


@pytest.fixture(scope="module")
def eleven_minutes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    samples, rate = sf.read(LONG, dtype="float32")
    pause = np.zeros(rate // 2, dtype=np.float32)
    path = tmp_path_factory.mktemp("audio") / "eleven-minutes.flac"
    sf.write(path, np.concatenate([samples, pause] * 15), rate)  # 15 x 46.4 s = 11.6 minutes
    return path


def expected_text(pieces: int) -> str:
    return " ".join(f"Piece {i} {half} here." for i in range(pieces) for half in ("begins", "ends"))


def test_over_ten_minutes_is_split_under_the_servers_limit(eleven_minutes: Path) -> None:
    duration = sf.info(eleven_minutes).duration
    with fake_like("stt", transcript=piece_transcript) as stt, vt.Client(stt.base_url) as client:
        with pytest.raises(
            vt.BadRequestError,
            match=TOO_LONG,
        ):
            client.transcribe(eleven_minutes, language="en", chunking="server")
        stt.fake.clear_requests()
        result = client.transcribe(eleven_minutes, language="en")
        uploads = [r.files["file"] for r in stt.fake.received("/v1/audio/transcriptions")]
        stt.fake.clear_requests()
        with client.transcribe_stream(eleven_minutes, language="en") as stream:
            streamed = stream.until_done()
    assert result.requests == len(uploads) >= 24
    assert all((audio_seconds(u.content) or 0) <= 600 for u in uploads)
    assert result.text.strip() == expected_text(len(uploads)) and "  " not in result.text
    assert streamed.text.strip() == result.text.strip()
    assert result.segments[0].start == 0.0
    assert result.segments[-1].end == pytest.approx(duration, abs=0.01)
    starts = [s.start for s in result.segments]
    assert starts == sorted(starts)
