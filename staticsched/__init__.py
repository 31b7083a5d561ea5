"""staticsched: cycle-exact static scheduling of AI-accelerator cores."""

from staticsched.errors import StaticschedError

__all__ = ["StaticschedError"]
__version__ = "0.1.0"
