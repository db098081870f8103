"""Images as chat content parts, for multimodal scoring, reranking and OCR requests.

vLLM takes images inside ``{"content": [...]}`` inputs as OpenAI-style content parts::

    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}

The two public entry points turn anything a user holds into that form:

- :func:`image_to_data_url`: a path, ``bytes``, a binary file object, a PIL image, a numpy array, a
  ``data:`` URL or an ``http(s)://`` URL -> the URL string to send.
- :func:`image_content_part`: the same inputs -> the content-part dict.

Encoded image bytes (PNG, JPEG, GIF, WebP, BMP, TIFF) are sent as they are, without decoding; pillow is
only needed for PIL images and numpy arrays, which are encoded as PNG. ``http(s)`` URLs are passed on for
the server to fetch (vLLM answers 422 when it cannot).
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

from .errors import InvalidInputError

ImageInput = Any
"""Anything :func:`image_to_data_url` accepts (see there)."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)
_PILLOW_FIX = "Install pillow (`pip install 'vllm-tasks[image]'`), or pass encoded PNG/JPEG bytes."


def sniff_mime_type(data: bytes) -> str | None:
    """The MIME type of encoded image bytes from their first bytes, or ``None`` if unrecognised.

    Example:
        >>> sniff_mime_type(b"\\x89PNG\\r\\n\\x1a\\n...")
        'image/png'
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    return None


def is_image(value: object) -> bool:
    """Whether ``value`` is an image object this module converts without being told.

    True for ``bytes``/``bytearray``/``memoryview``, ``pathlib`` paths, binary file objects, PIL images
    and numpy arrays. Plain strings are False: in a document list a string is text (wrap a path in
    ``pathlib.Path``, or call :func:`image_content_part` on a URL).
    """
    if isinstance(value, bytes | bytearray | memoryview | os.PathLike):
        return True
    if hasattr(value, "read") and not isinstance(value, str):
        return True
    return _is_pil_image(value) or _is_ndarray(value)


def image_to_data_url(image: ImageInput, *, field: str = "image") -> str:
    """Turn an image into the URL string of an ``image_url`` content part.

    Args:
        image: one of
            - ``str`` or ``os.PathLike``: a file path (a ``str`` starting with ``data:`` or
              ``http(s)://`` is taken as a URL instead);
            - ``bytes`` / ``bytearray`` / ``memoryview``: an encoded image file (PNG, JPEG, GIF, WebP,
              BMP, TIFF);
            - a binary file object (anything with ``read()``);
            - a ``PIL.Image.Image`` (encoded as PNG);
            - a numpy array ``[h, w]``, ``[h, w, 3]`` or ``[h, w, 4]`` of ``uint8`` (encoded as PNG).
        field: the argument name used in error messages (e.g. ``documents[3]``).

    Returns:
        A ``data:<mime>;base64,...`` URL, or the ``http(s)``/``data:`` URL unchanged.

    Raises:
        InvalidInputError: for a missing file, unrecognised bytes, or an unsupported type.
        ImportError: for a numpy array when pillow is not installed.

    Example:
        >>> image_to_data_url(Path("cat.png"))[:22]
        'data:image/png;base64,'
    """
    if isinstance(image, str):
        stripped = image.strip()
        if stripped.startswith("data:"):
            if ";base64," not in stripped:
                raise InvalidInputError(
                    field, image, "is a data URL without ';base64,'", "vLLM only decodes base64 data URLs."
                )
            return stripped
        if stripped.startswith(("http://", "https://")):
            return stripped
        return _from_path(Path(image), field)
    if isinstance(image, os.PathLike):
        return _from_path(Path(os.fspath(image)), field)
    if isinstance(image, bytes | bytearray | memoryview):
        return _from_bytes(bytes(image), field)
    if _is_pil_image(image):
        return _pil_to_data_url(image)
    if _is_ndarray(image):
        return _pil_to_data_url(_ndarray_to_pil(image, field))
    if hasattr(image, "read"):
        data = image.read()
        if not isinstance(data, bytes | bytearray):
            raise InvalidInputError(
                field, image, "is a text-mode file object", "Open the image with mode 'rb'."
            )
        return _from_bytes(bytes(data), field)
    raise InvalidInputError(
        field,
        type(image).__name__,
        "is not an image",
        "Pass a path, bytes, a binary file object, a PIL image, a numpy array or a data/http(s) URL.",
    )


def image_content_part(image: ImageInput, *, field: str = "image") -> dict[str, Any]:
    """Turn an image into a chat content part ``{"type": "image_url", "image_url": {"url": ...}}``.

    Args:
        image: anything :func:`image_to_data_url` accepts.
        field: the argument name used in error messages.

    Returns:
        The content-part dict, ready to put in ``{"content": [...]}``.

    Raises:
        InvalidInputError: see :func:`image_to_data_url`.

    Example:
        >>> part = image_content_part("https://example.com/cat.jpg")
        >>> part["image_url"]["url"]
        'https://example.com/cat.jpg'
    """
    return {"type": "image_url", "image_url": {"url": image_to_data_url(image, field=field)}}


def _from_path(path: Path, field: str) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInputError(
            field, str(path), f"cannot be read ({error.strerror or error})", "Pass an existing image file."
        ) from error
    return _from_bytes(data, field)


def _from_bytes(data: bytes, field: str) -> str:
    mime = sniff_mime_type(data)
    if mime is None:
        raise InvalidInputError(
            field,
            data[:16],
            "is not a recognised image file (PNG, JPEG, GIF, WebP, BMP, TIFF)",
            "Pass encoded image bytes, or a PIL image.",
        )
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _is_pil_image(value: object) -> bool:
    return any(cls.__name__ == "Image" and cls.__module__.startswith("PIL.") for cls in type(value).__mro__)


def _is_ndarray(value: object) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _pil_to_data_url(image: Any) -> str:
    buffer = io.BytesIO()
    if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "I", "I;16", "1"):
        image = image.convert("RGB")
    image.save(buffer, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def _ndarray_to_pil(array: Any, field: str) -> Any:
    try:
        from PIL import Image
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"{field}: a numpy image needs pillow. {_PILLOW_FIX}") from error
    shape = tuple(array.shape)
    if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] not in (1, 3, 4)):
        raise InvalidInputError(
            field, f"ndarray{shape}", "is not an image array", "Use shape [h, w], [h, w, 3] or [h, w, 4]."
        )
    if str(array.dtype) != "uint8":
        raise InvalidInputError(
            field,
            f"ndarray dtype {array.dtype}",
            "must be uint8",
            "Scale to 0..255 and convert with `array.astype(numpy.uint8)`.",
        )
    if len(shape) == 3 and shape[2] == 1:
        array = array[:, :, 0]
    return Image.fromarray(array)
