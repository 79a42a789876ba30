"""A keyword-spotting data set synthesized here, without downloads: ten keywords spoken by espeak-ng
(Debian) in several voices, rates and pitches, resampled to 16 kHz, placed at a random offset in a
1 s window at a random gain, with white noise at 5..25 dB SNR; 49 x 20 log-mel features (30 ms
frames every 20 ms), computed in numpy. Deterministic: espeak-ng's output is fixed for a given
voice, rate and pitch, and the augmentation draws from seeded generators.

The split is by speaker: the held-out voices (two accents, male and female variants) and rates
never occur in training. docs/int4.md states the recipe and the figures.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np

KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
# espeak-ng voice + variant: the training speakers; the held-out ones are two other accents, male and female.
TRAIN_VOICES = tuple(
    f"{voice}+{variant}"
    for voice in ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-gb-x-gbclan")
    for variant in ("m1", "m3", "f2", "f5")
)
TEST_VOICES = ("en-us-nyc+m1", "en-us-nyc+f4", "en-gb-x-gbcwmd+m7", "en-gb-x-gbcwmd+f3")
TRAIN_RATES = (135, 195)  # words per minute (espeak-ng -s)
TEST_RATES = (150, 190)
PITCHES = (30, 50, 70)  # espeak-ng -p, 0..99; one per utterance, in turn
SAMPLE_RATE = 16000
FRAME, HOP, FFT, MELS = 480, 320, 512, 20  # 30 ms frames every 20 ms: 49 frames in 1 s
FRAMES = 1 + (SAMPLE_RATE - FRAME) // HOP
TRAIN_DRAWS, TEST_DRAWS = 2, 12  # augmented copies (offset, gain, noise) of each utterance
SNR_DB = (5.0, 25.0)


def _speak(word: str, voice: str, rate: int, pitch: int) -> np.ndarray:
    """espeak-ng's WAV (16-bit mono) as float samples at 16 kHz."""
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(rate), "-p", str(pitch), "--stdout", word],
        check=True,
        capture_output=True,
    ).stdout
    assert wav[:4] == b"RIFF" and wav[36:40] == b"data", f"espeak-ng -v {voice}: not a plain WAV"
    rate_hz = int.from_bytes(wav[24:28], "little")
    samples = np.frombuffer(wav[44 : 44 + (len(wav) - 44) // 2 * 2], "<i2").astype(np.float64) / 32768.0
    # linear-interpolation resampling after a 3-tap smoothing (espeak-ng's 22,050 Hz has little energy
    # above 8 kHz)
    smoothed = np.convolve(samples, [0.25, 0.5, 0.25], mode="same")
    times = np.arange(int(len(samples) * SAMPLE_RATE / rate_hz)) * (rate_hz / SAMPLE_RATE)
    return np.interp(times, np.arange(len(samples)), smoothed)


def _trim(samples: np.ndarray) -> np.ndarray:
    """The utterance without its leading and trailing silence, at most 1 s."""
    loud = np.flatnonzero(np.abs(samples) > 0.02 * np.abs(samples).max())
    return samples[loud[0] : loud[-1] + 1][:SAMPLE_RATE]


def _place(speech: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One augmented 1 s clip: random offset, gain and white-noise SNR."""
    clip = np.zeros(SAMPLE_RATE)
    start = int(rng.integers(0, SAMPLE_RATE - len(speech) + 1))
    clip[start : start + len(speech)] = speech * rng.uniform(0.3, 1.0) / np.abs(speech).max()
    power = np.mean(clip[start : start + len(speech)] ** 2)
    snr = rng.uniform(*SNR_DB)
    return clip + rng.normal(0.0, np.sqrt(power / 10 ** (snr / 10)), SAMPLE_RATE)


def _mel_filters() -> np.ndarray:
    """[FFT // 2 + 1, MELS] triangular filters, evenly spaced on the mel scale from 20 Hz to 7.6 kHz."""

    def mel(hz):
        return 2595.0 * np.log10(1.0 + hz / 700.0)

    edges_hz = 700.0 * (10 ** (np.linspace(mel(20.0), mel(7600.0), MELS + 2) / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(FFT, 1.0 / SAMPLE_RATE)
    lower, center, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bins - lower) / (center - lower)
    falling = (upper - bins) / (upper - center)
    return np.maximum(0.0, np.minimum(rising, falling)).T


def log_mel(clips: np.ndarray) -> np.ndarray:
    """[N, SAMPLE_RATE] clips -> [N, FRAMES, MELS] log-mel energies."""
    index = np.arange(FRAMES)[:, None] * HOP + np.arange(FRAME)
    window, filters = np.hanning(FRAME).astype(np.float32), _mel_filters().astype(np.float32)
    features = []
    for chunk in np.array_split(clips.astype(np.float32), max(1, len(clips) // 64)):
        spectrum = np.fft.rfft(chunk[:, index] * window, FFT)
        features.append(np.log((spectrum.real**2 + spectrum.imag**2).astype(np.float32) @ filters + 1e-6))
    return np.concatenate(features)


def _split(voices, rates, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    jobs = [(word, voice, rate) for word in KEYWORDS for voice in voices for rate in rates]
    jobs = [(*job, PITCHES[n % len(PITCHES)]) for n, job in enumerate(jobs)]
    with ThreadPoolExecutor(4) as pool:
        utterances = [_trim(speech) for speech in pool.map(lambda job: _speak(*job), jobs)]
    rng = np.random.default_rng(seed)
    clips = np.stack([_place(speech, rng) for speech in utterances for _ in range(draws)])
    labels = np.repeat([KEYWORDS.index(job[0]) for job in jobs], draws)
    return log_mel(clips), labels


def synthesize() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): x float32 [N, 1, FRAMES, MELS], normalized by the
    training set's mean and standard deviation; y int64 keyword indices."""
    x_train, y_train = _split(TRAIN_VOICES, TRAIN_RATES, TRAIN_DRAWS, seed=0)
    x_test, y_test = _split(TEST_VOICES, TEST_RATES, TEST_DRAWS, seed=1)
    mean, std = x_train.mean(), x_train.std()
    return (
        ((x_train - mean) / std).astype(np.float32)[:, None],
        y_train.astype(np.int64),
        ((x_test - mean) / std).astype(np.float32)[:, None],
        y_test.astype(np.int64),
    )
