"""Language identification with CLD3: Sundanese and Indonesian told apart, nothing guessed for empty text."""

from __future__ import annotations

from senseforge.data.langid import detect


def test_sundanese_and_indonesian() -> None:
    assert detect("Naon anu biasana dianggo ku urang Sunda pikeun ngadamel sangu liwet?") == "su"
    assert detect("Dimana urang tiasa mendakan curug anu endah di Jawa Barat?") == "su"
    assert (
        detect("Di mana biasanya kita dapat menemukan air mancur yang sering menjadi atraksi di tempat umum?") == "id"
    )
    assert detect("   ") is None
