#!/usr/bin/env bash
# How the committed WAV fixtures were made (once; espeak-ng output differs between versions, so the
# files are committed and tests assert loosely). Needs espeak-ng and sox. 16 kHz, mono, 16-bit PCM.
set -euo pipefail
cd "$(dirname "$0")"
say() {  # say FILE VOICE TEXT
    espeak-ng -s 130 -v "$2" -w "/tmp/$1.raw.wav" "$3"
    sox "/tmp/$1.raw.wav" -r 16000 -c 1 -b 16 "$1.wav"
    rm -f "/tmp/$1.raw.wav"
}
say fox en "the quick brown fox jumps over the lazy dog"
say numbers en "one, two, three, four, five. The meeting starts at ten o'clock."
say french fr "Bonjour. Je m'appelle Marie et j'habite à Paris. J'aime beaucoup les livres."
# About 45 s: several sentences separated by half-second pauses (low-energy points for chunking).
LONG=(
  "Once upon a time there was a small village near a quiet river."
  "Every morning the baker opened his shop and sold fresh bread to the farmers."
  "One day a stranger arrived with a large wooden box on his back."
  "He told the children that the box contained the music of the mountains."
  "The children did not believe him, so he opened the box and played a song."
  "The whole village came to listen, and the baker gave the stranger free bread."
  "In the evening the stranger walked away along the river and was never seen again."
  "But the children remembered the song for the rest of their lives."
)
parts=()
for i in "${!LONG[@]}"; do
    espeak-ng -s 130 -v en -w "/tmp/long$i.wav" "${LONG[$i]}"
    sox "/tmp/long$i.wav" -r 16000 -c 1 -b 16 "/tmp/long$i.16k.wav" pad 0 0.5
    parts+=("/tmp/long$i.16k.wav")
done
sox "${parts[@]}" long45.wav
rm -f /tmp/long*.wav
soxi -D fox.wav numbers.wav french.wav long45.wav
