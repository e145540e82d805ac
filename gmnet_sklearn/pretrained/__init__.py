"""Package data: pretrained encoders that ship with gmnet_sklearn (``pretrained="moses"``); see README.md."""
