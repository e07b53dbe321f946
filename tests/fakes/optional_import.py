"""A preload module with an optional import, as Keras imports scikit-learn where it is
installed: the warm process may keep it out (FrameworkSpec.preload's "!")."""

try:
    import colorsys
except ImportError:
    colorsys = None  # type: ignore[assignment]

FOUND = colorsys is not None
