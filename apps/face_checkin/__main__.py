"""``python -m apps.face_checkin --model M --people DIR --out DIR SOURCE [SOURCE ...]``."""

from apps.face_checkin.cli import app

app(prog_name="python -m apps.face_checkin")
