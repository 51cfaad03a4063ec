"""Ready-made toolsets: confined file reading and a safe calculator.

The calculator tool is re-exported as ``calculator_tool`` so that the name ``calculator``
keeps meaning the submodule ``turnstream.toolsets.calculator``.
"""

from .calculator import calculator as calculator_tool
from .files import make_file_tools
from .notebook import NOTEBOOK_TOOLS as NOTEBOOK_TOOLS

__all__ = ["calculator_tool", "make_file_tools"]
