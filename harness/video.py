"""Writing rendered frames to a video file: MP4 (H.264 through imageio-ffmpeg) or GIF (Pillow).

MP4 frames stream to ffmpeg as they come (a long episode never sits in memory);
``imageio-ffmpeg`` ships its own ffmpeg binary inside its wheel. A GIF is kept as
palette images (a quarter of the RGB size) and written at :meth:`VideoWriter.close`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["VIDEO_SUFFIXES", "VideoWriter", "read_video"]

VIDEO_SUFFIXES = (".mp4", ".gif")


class VideoWriter:
    """Append RGB frames (H x W x 3, uint8), then :meth:`close` to finish the file."""

    def __init__(self, path: Path, fps: float) -> None:
        suffix = path.suffix.lower()
        if suffix not in VIDEO_SUFFIXES:
            raise ValueError(f"video file must end in .mp4 or .gif, got {path.name!r}")
        self.path = path
        self.fps = float(fps)
        self.kind = suffix[1:]
        self.frames = 0
        self.size: tuple[int, int] | None = None  # height, width
        self._gif: list[Any] = []
        self._ffmpeg: Any = None

    def append(self, frame: np.ndarray) -> None:
        image = np.ascontiguousarray(np.asarray(frame, dtype=np.uint8)[..., :3])
        if self.size is None:
            self.size = (int(image.shape[0]), int(image.shape[1]))
            if self.kind == "mp4":
                self._ffmpeg = self._start_mp4()
        elif image.shape[:2] != self.size:
            raise ValueError(f"frame of size {image.shape[:2]} in a video of size {self.size}")
        if self._ffmpeg is not None:
            self._ffmpeg.send(image)
        else:
            from PIL import Image

            self._gif.append(Image.fromarray(image).quantize(colors=255, dither=Image.Dither.NONE))
        self.frames += 1

    def _start_mp4(self) -> Any:
        import imageio_ffmpeg

        assert self.size is not None
        height, width = self.size
        writer = imageio_ffmpeg.write_frames(
            str(self.path),
            (width, height),
            fps=self.fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            macro_block_size=2,  # yuv420p needs even sizes; 400x600 and 240x320 stay as they are
            quality=7,
            ffmpeg_log_level="error",
        )
        writer.send(None)  # start the generator
        return writer

    def close(self) -> None:
        if self._ffmpeg is not None:
            self._ffmpeg.close()
            self._ffmpeg = None
        elif self._gif:
            first, *rest = self._gif
            first.save(
                self.path,
                save_all=True,
                append_images=rest,
                duration=max(20, round(1000 / self.fps)),
                loop=0,
            )
            self._gif = []


def read_video(path: Path) -> Iterator[np.ndarray]:
    """The decoded RGB frames of an MP4 or GIF this module wrote (for checks and tests)."""
    if path.suffix.lower() == ".gif":
        from PIL import Image, ImageSequence

        with Image.open(path) as image:
            for frame in ImageSequence.Iterator(image):
                yield np.asarray(frame.convert("RGB"))
        return
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    for data in reader:
        yield np.frombuffer(data, dtype=np.uint8).reshape(height, width, 3)
