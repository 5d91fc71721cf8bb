"""After training (tutorial: "Run inference" to "Export the model"; paper §6.1):
greedy and beam decoding (``decoding``), the exported translator (``export``),
BLEU (``bleu``, ``evaluation``), checkpoint averaging (``averaging``) and
attention plots (``plotting``)."""
