"""The bounds the KTIR reader puts on a program's text, so that no input reaches a Python limit
(recursion depth, integer-string conversion, the generated affine evaluators) or exhausts
memory before it is refused with a located message (docs/errors.md, "KTIR bounds").

Each bound is far above what real programs use (measured on the corpus, the fixtures and the
upstream programs: at most 2,786 ops and 3,245 lines in a file, lines of 18,028 characters,
regions nested 4 deep, constants of 1,024 elements).
"""

from __future__ import annotations

MAX_TEXT_CHARS = 256 * 1024 * 1024  # one program text (file)
MAX_LINE_CHARS = 128 * 1024 * 1024  # one line, and so one token written on one line
MAX_TOKEN_CHARS = MAX_LINE_CHARS  # one token that spans lines (a type, a dense literal)
MAX_LITERAL_CHARS = 100  # one number literal (i64's largest value has 19 digits)
MAX_NESTING = 64  # regions inside regions, array attributes and locations inside each other
MAX_OPS = 200_000  # ops of one module (one file)
# lines of one text, counted before tokenizing (which costs ~70 us a distinct line): a text of
# a million one-op lines is refused at once instead of after a minute of tokenizing
MAX_LINES = 2 * MAX_OPS
MAX_CONSTANT_ELEMENTS = 1 << 28  # elements of one constant tensor (splat or dense)
MAX_AFFINE_DEPTH = 64  # nesting of one affine expression (parentheses, div/mod chains)
