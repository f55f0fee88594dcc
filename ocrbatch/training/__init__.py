"""Fine-tuning the embedded engine's line recognizer on pages the project draws itself (`make train-rec`).

Not imported by the converter: torch is needed only here. The stages, one module each:

    text.py     licensed plain text and made-up records -> lines to draw
    draw.py     lines -> whole pages (fonts, sizes, layouts, scan defects), with each line's box and text
    crops.py    pages -> the detector's own line crops, matched to the drawn lines (the labels)
    graph.py    a shipped ONNX model (recognizer or detector) as a trainable torch module; its weights written back
    train.py    the recognizer's loop: CTC, frozen BatchNorm statistics, checkpoints, resume, evaluation, export
    distil.py   the detector's: the tiny detector taught the small one's probability maps (`make train-det`)
"""
