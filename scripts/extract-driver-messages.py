#!/usr/bin/env python3
"""Extract the error- and warning-level kernel-log messages of the NVIDIA driver.

Reads a checkout of https://github.com/NVIDIA/open-gpu-kernel-modules and lists
every call that can print an error- or warning-level message to the kernel log,
with the message's format string, as a TSV table.  gpudoctor's kernel-log
recognition is meant to be generated from this table, so that what it knows
about driver messages comes from the driver's own source.

Only the Python 3.11 standard library is used.  The script does not run the C
preprocessor; it carries a small one of its own that knows just enough to:

  * strip comments, skip "#if 0" blocks, and keep only the first branch of a
    conditional that sits inside the arguments of a call;
  * split a call's arguments (multi-line, nested parentheses, strings with
    escaped quotes, character literals);
  * concatenate adjacent string literals and expand object-like macros that
    are defined as string literals somewhere in the tree (NvU64_fmtx,
    NV_PCI_DEV_FMT, ...).  A macro it cannot expand to a plain string stays in
    the format as {MACRO_NAME};
  * follow "wrapper" macros of the tree (a macro whose body calls one of the
    printers below or another wrapper, such as NV_ERROR_LOG_COND or
    NVSWITCH_REPORT_NONFATAL).  When what a wrapper prints depends on its
    arguments (a format, level or Xid passed in), the message is listed at each
    place the wrapper is used; when it prints the same text wherever it is
    used, the message is listed once, at the #define;
  * resolve Xid and SXid numbers given as named constants (#define or enum).

The printers it knows ("emitters") are listed in EMITTERS below, each with the
level(s) it prints at, where its format string is, the prefix the driver puts
in front of the message in the kernel log, and whether a release driver prints
it with default settings.

Output columns (tab separated, one row per message):

  level       error | warning
  path        source file, relative to the repository root
  line        line of the call (of the wrapper's use, or of its #define for a
              message a wrapper prints the same wherever it is used)
  function    enclosing C function (best effort; empty when unknown and for
              messages listed at a #define)
  format      the call's format string: literals concatenated, string macros
              expanded; backslash, tab, newline and carriage return are written
              as \\\\, \\t, \\n and \\r; other control characters as \\xNN
  emitter     the printer, e.g. NV_PRINTF; "WRAPPER>PRINTER" when reached
              through a wrapper macro
  code        the Xid or SXid number for Xid/SXid emitters (a named constant is
              resolved to its number; {expr} when not a constant)
  visibility  default      printed by a release driver with default settings
              verbose      needs a raised log level or a debug option
                           (NV_PRINTF warnings: RmMsg registry key;
                           UVM_ERR_PRINT: uvm_debug_prints=1; DP_PRINTF:
                           nvidia-modeset debug logging)
              debug-build  compiled out of release drivers (NVSWITCH_PRINT,
                           NVLINK_PRINT, nvidia-uvm's UVM_ASSERT_MSG)
              conditional  the level is chosen at run time from a condition;
                           the row carries the most severe level it can take
  prefix      what the printer puts in front of the format in the kernel log,
              as a template; printf conversions are the driver's own, and
              <...> placeholders are described in the README next to the TSV.

Example:
  scripts/extract-driver-messages.py /tmp/open-gpu-kernel-modules \\
      --tag 595.45.04 -o testdata/driver_messages/open-gpu-kernel-modules.tsv
"""

from __future__ import annotations

import argparse
import bisect
import collections
import dataclasses
import os
import re
import subprocess
import sys
from typing import Iterable

# Folders of the repository that are walked by default.  src/nvidia is the
# resource manager (RM), src/common holds nvswitch, nvlink, displayport, libos
# and other shared code, kernel-open holds the Linux glue of every module.
DEFAULT_ROOTS = ("src/nvidia", "src/common", "kernel-open")
SOURCE_EXTENSIONS = (".c", ".h", ".cpp")

# ---------------------------------------------------------------------------
# Level vocabularies.  Each maps a level token to "error", "warning", or None
# for levels below warning (info, notice, debug...), which are not extracted.
# ---------------------------------------------------------------------------

RM_LEVELS = {
    "LEVEL_FATAL": "error", "LEVEL_ERROR": "error", "LEVEL_WARNING": "warning",
    "LEVEL_NOTICE": None, "LEVEL_INFO": None, "LEVEL_SILENT": None,
}
NV_DBG_LEVELS = {
    "NV_DBG_ERRORS": "error", "NV_DBG_WARNINGS": "warning",
    "NV_DBG_USERERRORS": None, "NV_DBG_SETUP": None, "NV_DBG_INFO": None,
    # portDbgPrintf() on Linux is nv_printf(0xFFFFFFFF, ...): always printed.
    "0xFFFFFFFF": "error", "0xffffffff": "error",
    # The RM's LEVEL_* values equal the NV_DBG_* ones, and a few calls use them.
    "LEVEL_ERROR": "error", "LEVEL_WARNING": "warning", "LEVEL_NOTICE": None, "LEVEL_INFO": None,
}
NVSWITCH_SHORT_LEVELS = {
    "ERROR": "error", "WARN": "warning",
    "INFO": None, "SETUP": None, "NOISY": None, "MMIO": None,
}
NVSWITCH_DBG_LEVELS = {
    "NVSWITCH_DBG_LEVEL_ERROR": "error", "NVSWITCH_DBG_LEVEL_WARN": "warning",
    "NVSWITCH_DBG_LEVEL_INFO": None, "NVSWITCH_DBG_LEVEL_SETUP": None,
    "NVSWITCH_DBG_LEVEL_NOISY": None, "NVSWITCH_DBG_LEVEL_MMIO": None,
}
NVLINK_LEVELS = {
    "NVLINK_DBG_LEVEL_ERRORS": "error", "NVLINK_DBG_LEVEL_WARNINGS": "warning",
    "NVLINK_DBG_LEVEL_USERERRORS": None, "NVLINK_DBG_LEVEL_SETUP": None,
    "NVLINK_DBG_LEVEL_INFO": None,
}
NVKMS_LEVELS = {
    "NVKMS_LOG_LEVEL_ERROR": "error", "NVKMS_LOG_LEVEL_WARN": "warning",
    "NVKMS_LOG_LEVEL_INFO": None,
}
DP_LEVELS = {
    "DP_FATAL": "error", "DP_HW_ERROR": "error", "DP_ERROR": "error",
    "DP_WARNING": "warning", "DP_NOTICE": None, "DP_INFO": None, "DP_SILENT": None,
}
KERN_LEVELS = {
    "KERN_EMERG": "error", "KERN_ALERT": "error", "KERN_CRIT": "error",
    "KERN_ERR": "error", "KERN_WARNING": "warning", "KERN_NOTICE": None,
    "KERN_INFO": None, "KERN_DEBUG": None, "KERN_DEFAULT": None, "KERN_CONT": None,
}

# Prefix templates (see the README for the placeholders).
RM_PREFIX = "NVRM: <gpu?><function>: "
XID_PREFIX = "NVRM: Xid (PCI:%04x:%02x:%02x<mig?>): %d, <pid?>"
NV_DEV_PREFIX = "NVRM: GPU %04x:%02x:%02x.%x: "
SXID_PREFIX = "nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, "
UVM_PREFIX = "nvidia-uvm: %s:%u %s[pid:%d] "


@dataclasses.dataclass(frozen=True)
class Emitter:
    """How one printing function or macro is called.

    name        identifier of the printer
    levels      vocabulary used to read the level argument(s)
    level_args  indexes of the level argument(s); several for NV_PRINTF_COND
    fixed_level level when the printer has no level argument
    fmt_arg     index of the format argument
    level_search  the level is the first argument that reads as a level and the
                format is the argument after it (NVLINK_PRINT, nvlink_print)
    inner_parens  the real argument list is wrapped in a second pair of
                parentheses: NVLINK_PRINT((module, level, fmt, ...))
    kern_level  the level is a KERN_* token at the start of the format (printk)
    code_arg    index of the Xid / SXid number argument
    code_from_context  the Xid is the .xid member of an XidContext argument
    prefix      template of what the printer puts before the message
    prefix_by_level  the same, per level, for printers whose prefix names the level
    prefix_arg  index of an argument whose string value is appended to prefix
    suffix      text the printer appends to the format at compile time
    visibility  "default", "verbose", "debug-build", or a dict level->value
    """

    name: str
    levels: dict | None = None
    level_args: tuple = ()
    fixed_level: str | None = None
    fmt_arg: int = 0
    level_search: bool = False
    inner_parens: bool = False
    kern_level: bool = False
    code_arg: int | None = None
    code_from_context: bool = False
    prefix: str = ""
    prefix_by_level: dict | None = None
    prefix_arg: int | None = None
    suffix: str = ""
    visibility: object = "default"

    def visibility_for(self, level: str) -> str:
        if isinstance(self.visibility, dict):
            return self.visibility[level]
        return self.visibility


def _kernel_fixed(name: str, level: str, fmt_arg: int = 0, prefix: str = "") -> Emitter:
    return Emitter(name, fixed_level=level, fmt_arg=fmt_arg, prefix=prefix)


EMITTERS: dict[str, Emitter] = {e.name: e for e in [
    # --- resource manager (src/nvidia) ----------------------------------------
    # NV_PRINTF goes to nvDbg_Printf, which prints at LEVEL_ERROR and above on
    # release drivers (LEVEL_WARNING and below need the RmMsg registry key) and
    # writes "NVRM: " + optional "GPUn " + function name + ": " before the text.
    Emitter("NV_PRINTF", RM_LEVELS, level_args=(0,), fmt_arg=1, prefix=RM_PREFIX,
            visibility={"error": "default", "warning": "verbose"}),
    Emitter("NV_PRINTF_EX", RM_LEVELS, level_args=(1,), fmt_arg=2, prefix="",
            visibility={"error": "default", "warning": "verbose"}),
    Emitter("NV_PRINTF_COND", RM_LEVELS, level_args=(1, 2), fmt_arg=3, prefix=RM_PREFIX,
            visibility={"error": "default", "warning": "verbose"}),
    Emitter("NV_ASSERT_PRINTF", RM_LEVELS, level_args=(0,), fmt_arg=1, prefix=RM_PREFIX,
            visibility={"error": "default", "warning": "verbose"}),
    # portDbgPrintf is nv_printf(0xFFFFFFFF, ...): unconditional, no prefix.
    Emitter("portDbgPrintf", fixed_level="error", fmt_arg=0),
    Emitter("NV_ERROR_LOG_DATA", fixed_level="error", fmt_arg=2, prefix="NVRM: "),
    # Xid emitters: nvErrorLog* -> krcReportXid -> "NVRM: Xid (PCI:...): N, msg".
    Emitter("nvErrorLog_va", fixed_level="error", fmt_arg=2, code_arg=1, prefix=XID_PREFIX),
    Emitter("nvErrorLog2_va", fixed_level="error", fmt_arg=3, code_arg=1,
            code_from_context=True, prefix=XID_PREFIX),
    Emitter("NV_ERROR_LOG", fixed_level="error", fmt_arg=2, code_arg=1, prefix=XID_PREFIX),
    Emitter("osErrorLog", fixed_level="error", fmt_arg=2, code_arg=1, prefix=XID_PREFIX),
    # CrashCat reports (GSP/falcon crash dumps): the first line of a report is
    # logged as an Xid when the Xid argument is not 0, otherwise (and for the
    # later lines) as "<engine name> message".
    Emitter("crashcatEnginePrintf", fixed_level="error", fmt_arg=2, code_arg=1,
            prefix="<crashcat>"),
    # --- Linux glue (kernel-open/nvidia and the RM's unix layer) ---------------
    Emitter("nv_printf", NV_DBG_LEVELS, level_args=(0,), fmt_arg=1),
    Emitter("NV_DEV_PRINTF", NV_DBG_LEVELS, level_args=(0,), fmt_arg=2, prefix=NV_DEV_PREFIX),
    Emitter("NV_DEV_PRINTF_STATUS", NV_DBG_LEVELS, level_args=(0,), fmt_arg=3,
            prefix=NV_DEV_PREFIX, suffix=" (0x%x)\n"),
    Emitter("NV_DMA_DEV_PRINTF", NV_DBG_LEVELS, level_args=(0,), fmt_arg=2, prefix="NVRM: %s: "),
    # --- NVSwitch (src/common/nvswitch) -----------------------------------------
    # NVSWITCH_PRINT is "((void)0)" unless DEVELOP/DEBUG/NV_MODS.
    Emitter("NVSWITCH_PRINT", NVSWITCH_SHORT_LEVELS, level_args=(1,), fmt_arg=2,
            prefix_by_level={"error": "%s[ERROR]: ", "warning": "%s[WARN ]: "},
            visibility="debug-build"),
    Emitter("NVSWITCH_PRINT_SXID", fixed_level="error", fmt_arg=2, code_arg=1, prefix=SXID_PREFIX),
    Emitter("NVSWITCH_PRINT_SXID_NO_BBX", fixed_level="error", fmt_arg=2, code_arg=1,
            prefix=SXID_PREFIX),
    Emitter("nvswitch_os_print", NVSWITCH_DBG_LEVELS, level_args=(0,), fmt_arg=1),
    # --- NVLink core (src/common/nvlink) -----------------------------------------
    # NVLINK_PRINT is "((void)(0))" unless DEVELOP/DEBUG/NV_MODS.
    Emitter("NVLINK_PRINT", NVLINK_LEVELS, level_search=True, inner_parens=True,
            prefix="nvidia-nvlink: ", visibility="debug-build"),
    Emitter("nvlink_print", NVLINK_LEVELS, level_search=True, prefix="nvidia-nvlink: "),
    # --- nvidia-uvm ------------------------------------------------------------------
    Emitter("UVM_ERR_PRINT", fixed_level="error", prefix=UVM_PREFIX, visibility="verbose"),
    Emitter("UVM_ERR_PRINT_RL", fixed_level="error", prefix=UVM_PREFIX, visibility="verbose"),
    Emitter("UVM_ERR_PRINT_ALWAYS", fixed_level="error", prefix=UVM_PREFIX),
    Emitter("UVM_ERR_PRINT_ALWAYS_RL", fixed_level="error", prefix=UVM_PREFIX),
    # --- nvidia-drm --------------------------------------------------------------------
    Emitter("NV_DRM_LOG_ERR", fixed_level="error", prefix="<drm>[nvidia-drm] ", suffix="\n"),
    Emitter("NV_DRM_LOG_WARN", fixed_level="warning", prefix="<drm>[nvidia-drm] ", suffix="\n"),
    Emitter("NV_DRM_DEV_LOG_ERR", fixed_level="error", fmt_arg=1,
            prefix="<drm>[nvidia-drm] [GPU ID 0x%08x] ", suffix="\n"),
    Emitter("NV_DRM_DEV_LOG_WARN", fixed_level="warning", fmt_arg=1,
            prefix="<drm>[nvidia-drm] [GPU ID 0x%08x] ", suffix="\n"),
    _kernel_fixed("DRM_ERROR", "error", prefix="<drm>"),
    _kernel_fixed("DRM_WARN", "warning", prefix="<drm>"),
    _kernel_fixed("DRM_DEV_ERROR", "error", 1, prefix="<drm>"),
    _kernel_fixed("drm_err", "error", 1, prefix="<drm>"),
    _kernel_fixed("drm_warn", "warning", 1, prefix="<drm>"),
    # --- nvidia-modeset and the DisplayPort library ------------------------------------
    Emitter("nvkms_log", NVKMS_LEVELS, level_args=(0,), fmt_arg=2, prefix_arg=1,
            prefix_by_level={"error": "nvidia-modeset: ERROR: ",
                             "warning": "nvidia-modeset: WARNING: "}),
    Emitter("DP_PRINTF", DP_LEVELS, level_args=(0,), fmt_arg=1,
            prefix_by_level={"error": "nvidia-modeset: ERROR: ",
                             "warning": "nvidia-modeset: WARNING: "},
            visibility="verbose"),
    # --- plain Linux kernel printers ----------------------------------------------------
    Emitter("printk", KERN_LEVELS, kern_level=True),
    Emitter("printk_ratelimited", KERN_LEVELS, kern_level=True),
    Emitter("printk_once", KERN_LEVELS, kern_level=True),
    Emitter("vprintk", KERN_LEVELS, kern_level=True),
    _kernel_fixed("pr_emerg", "error"), _kernel_fixed("pr_alert", "error"),
    _kernel_fixed("pr_crit", "error"), _kernel_fixed("pr_err", "error"),
    _kernel_fixed("pr_warn", "warning"), _kernel_fixed("pr_warning", "warning"),
    _kernel_fixed("pr_err_ratelimited", "error"), _kernel_fixed("pr_warn_ratelimited", "warning"),
    _kernel_fixed("pr_err_once", "error"), _kernel_fixed("pr_warn_once", "warning"),
    _kernel_fixed("dev_emerg", "error", 1, "%s %s: "), _kernel_fixed("dev_crit", "error", 1, "%s %s: "),
    _kernel_fixed("dev_alert", "error", 1, "%s %s: "), _kernel_fixed("dev_err", "error", 1, "%s %s: "),
    _kernel_fixed("dev_warn", "warning", 1, "%s %s: "),
    _kernel_fixed("dev_err_ratelimited", "error", 1, "%s %s: "),
    _kernel_fixed("dev_warn_ratelimited", "warning", 1, "%s %s: "),
    _kernel_fixed("WARN", "warning", 1), _kernel_fixed("WARN_ONCE", "warning", 1),
    _kernel_fixed("WARN_RATELIMIT", "warning", 1),
]}

C_KEYWORDS_BEFORE_CALL = {"return", "else", "do", "case", "sizeof"}
NOT_FUNCTION_NAMES = {"if", "while", "for", "switch", "return", "sizeof", "defined"}

# ---------------------------------------------------------------------------
# Low-level text handling
# ---------------------------------------------------------------------------

# Strings, character literals, comments; anything else is taken a char at a time.
_LEX = re.compile(
    r'(?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.|\\\n)*")'
    r"|(?P<chr>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*')"
    r"|(?P<lc>//(?:[^\n\\]|\\.|\\\n)*)"
    r"|(?P<bc>/\*.*?\*/)",
    re.S,
)


def strip_comments(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Blank out comments (newlines kept so line numbers stay right).

    Returns the new text and the sorted list of (start, end) spans of string
    and character literals in it, so matches inside literals can be ignored.
    """
    out = []
    literals = []
    pos = 0
    for m in _LEX.finditer(text):
        out.append(text[pos:m.start()])
        kind = m.lastgroup
        s = m.group()
        if kind in ("str", "chr"):
            # Blanking keeps every offset, so the literal sits where it was.
            literals.append((m.start(), m.end()))
            out.append(s)
        else:
            out.append(re.sub(r"[^\n]", " ", s))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), literals


def dead_spans(text: str) -> list[tuple[int, int]]:
    """Spans of text inside "#if 0" blocks (up to the matching #else/#elif/#endif)."""
    spans = []
    stack = []  # for each open #if: True if this #if started a dead region
    dead_start = None
    depth_dead = 0
    offset = 0
    for line in text.splitlines(keepends=True):
        d = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
        if d:
            kw, rest = d.group(1), d.group(2).strip()
            if kw in ("if", "ifdef", "ifndef"):
                starts_dead = (depth_dead == 0 and kw == "if"
                               and re.fullmatch(r"\(?\s*0\s*\)?", rest) is not None)
                stack.append(starts_dead)
                if starts_dead:
                    depth_dead = 1
                    dead_start = offset
                elif depth_dead:
                    depth_dead += 1
            elif kw in ("elif", "else"):
                if stack and stack[-1] and depth_dead == 1:
                    spans.append((dead_start, offset))
                    depth_dead = 0
                    stack[-1] = False
            elif kw == "endif":
                if stack:
                    started = stack.pop()
                    if started and depth_dead == 1:
                        spans.append((dead_start, offset))
                        depth_dead = 0
                    elif depth_dead > 1:
                        depth_dead -= 1
        offset += len(line)
    if depth_dead and dead_start is not None:
        spans.append((dead_start, offset))
    return spans


def in_spans(pos: int, spans: list[tuple[int, int]], starts: list[int]) -> bool:
    i = bisect.bisect_right(starts, pos) - 1
    return i >= 0 and spans[i][0] <= pos < spans[i][1]


def match_paren(text: str, open_idx: int) -> int:
    """Index of the ')' matching text[open_idx] == '(' (-1 if none).

    String and character literals are skipped; comments must already be gone.
    """
    depth = 0
    i = open_idx
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            i = skip_literal(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def skip_literal(text: str, i: int) -> int:
    """Index just past the string/char literal starting at text[i]."""
    quote = text[i]
    i += 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i + 1
        if c == "\n" and quote == "'":
            return i
        i += 1
    return n


def split_args(text: str) -> list[str]:
    """Split the text between a call's parentheses at top-level commas."""
    args = []
    depth = 0
    cur = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = skip_literal(text, i)
            cur.append(text[i:j])
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    tail = "".join(cur).strip()
    if tail or args:
        args.append(tail)
    return args


def first_branch(text: str) -> tuple[str, bool]:
    """Drop preprocessor lines from a call's text, keeping each conditional's first branch.

    Returns the text and whether any directive was found.
    """
    if "#" not in text:
        return text, False
    out = []
    found = False
    skip_depth = 0      # >0 while skipping a later branch
    depth = 0
    taking = []          # per open conditional: still in its first branch?
    for line in text.split("\n"):
        d = re.match(r"\s*#\s*(\w+)", line)
        if d and not line.lstrip().startswith("##"):
            found = True
            kw = d.group(1)
            if kw in ("if", "ifdef", "ifndef"):
                taking.append(skip_depth == 0)
                depth += 1
                if skip_depth:
                    skip_depth += 1
            elif kw in ("elif", "else"):
                if taking and taking[-1] and skip_depth == 0:
                    skip_depth = 1
            elif kw == "endif":
                if taking:
                    taking.pop()
                depth -= 1
                if skip_depth:
                    skip_depth -= 1
            out.append("")
            continue
        out.append("" if skip_depth else line)
    return "\n".join(out), found


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
            "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?", "e": "\x1b"}


def decode_c_string(lit: str) -> str:
    """Value of one C string literal (with its quotes and optional prefix)."""
    body = lit[lit.index('"') + 1:-1]
    out = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        e = body[i]
        if e == "\n":                      # line continuation inside a literal
            i += 1
        elif e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 1
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i:])
            out.append(chr(int(m.group(), 8)))
            i += len(m.group())
        elif e == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 1:])
            if m:
                out.append(chr(int(m.group(), 16) & 0xFF))
                i += 1 + len(m.group())
            else:
                out.append("x")
                i += 1
        else:
            out.append(e)
            i += 1
    return "".join(out)


def tsv_escape(s: str) -> str:
    s = s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group()), s)


_TOKEN = re.compile(
    r'(?P<str>(?:u8|[uUL])?"(?:[^"\\]|\\.)*")'
    r"|(?P<chr>(?:u8|[uUL])?'(?:[^'\\]|\\.)*')"
    r"|(?P<id>[A-Za-z_]\w*)"
    r"|(?P<num>\.?\d(?:[\w.]|[eEpP][+-])*)"
    r"|(?P<ws>\s+)"
    r"|(?P<punct>##|#|\.\.\.|->|<<|>>|[<>=!]=|&&|\|\||[-+*/%&|^~!<>=?:;,.()\[\]{}\\])",
    re.S,
)


def tokenize(text: str) -> list[tuple[str, str]]:
    toks = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if not m:
            toks.append(("punct", text[pos]))
            pos += 1
            continue
        toks.append((m.lastgroup, m.group()))
        pos = m.end()
    return toks


# ---------------------------------------------------------------------------
# Macro and constant tables
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class MacroDef:
    name: str
    params: list[str] | None      # None for object-like macros
    variadic: str | None          # name that stands for the variable arguments
    body: str
    path: str
    line: int


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?(.*)$")
_ENUM_CONST = re.compile(r"\b([A-Z_][A-Z0-9_]*)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*[,}\n]")


class Tables:
    """All #define macros and integer constants found in the walked files."""

    def __init__(self) -> None:
        self.macros: dict[str, list[MacroDef]] = collections.defaultdict(list)
        self.macros_at: dict[tuple[str, int], list[MacroDef]] = collections.defaultdict(list)
        self.enum_values: dict[str, int] = {}
        self._string_cache: dict[tuple[str, str], str | None] = {}
        self.ambiguous_used: dict[str, set[str]] = collections.defaultdict(set)

    def add_file(self, path: str, text: str) -> None:
        """Record the #defines and enum constants of one comment-stripped file."""
        lines = text.split("\n")
        # Lines inside "#if 0" blocks: their #defines do not exist.
        dead_lines = set()
        for a, b in dead_spans(text):
            dead_lines.update(range(text.count("\n", 0, a), text.count("\n", 0, b) + 1))
        i = 0
        while i < len(lines):
            line = lines[i]
            start = i
            if i in dead_lines:
                i += 1
                continue
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            i += 1
            m = _DEFINE.match(line)
            if not m:
                continue
            name, params, body = m.group(1), m.group(2), m.group(3).strip()
            plist = None
            variadic = None
            if params is not None:
                plist = [p.strip() for p in params[1:-1].split(",") if p.strip()]
                if plist and plist[-1].endswith("..."):
                    last = plist.pop()
                    variadic = last[:-3].strip() or "__VA_ARGS__"
            d = MacroDef(name, plist, variadic, body, path, start + 1)
            self.macros[name].append(d)
            self.macros_at[(path, start + 1)].append(d)
        for m in _ENUM_CONST.finditer(text):
            self.enum_values.setdefault(m.group(1), int(m.group(2), 0))

    def defs(self, name: str, path: str, function_like: bool) -> list[MacroDef]:
        """Definitions of name, those from path first, then the rest in path order."""
        ds = [d for d in self.macros.get(name, ()) if (d.params is not None) == function_like]
        return [d for d in ds if d.path == path] + [d for d in ds if d.path != path]

    def string_macro(self, name: str, path: str, depth: int = 0) -> str | None:
        """Value of an object-like macro that expands to a plain string, else None.

        When the tree has several definitions (one per platform or build), the
        first one that expands fully wins: the one in the same file if any,
        otherwise the first in path and line order.
        """
        key = (name, path if any(d.path == path for d in self.macros.get(name, ())) else "")
        if key in self._string_cache:
            return self._string_cache[key]
        self._string_cache[key] = None          # guards against recursion
        result = None
        values = set()
        if depth < 8:
            for d in self.defs(name, path, function_like=False):
                r = eval_string(d.body, d.path, self, depth + 1)
                if r is not None and not r.unresolved and r.literal:
                    values.add(r.text)
                    if result is None:
                        result = r.text
        if len(values) > 1:
            self.ambiguous_used[name] = values
        self._string_cache[key] = result
        return result

    def int_constant(self, expr: str, path: str, depth: int = 0) -> int | None:
        """Integer value of a constant expression such as 79, (79) or a named constant."""
        e = expr.strip()
        while e.startswith("(") and match_paren(e, 0) == len(e) - 1:
            e = e[1:-1].strip()
        e = re.sub(r"^\(\s*(?:NvU32|NvU64|NvS32|int|unsigned)\s*\)\s*", "", e)
        m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*", e)
        if m:
            return int(m.group(1), 0)
        if e in ("NV_TRUE", "NV_FALSE"):            # ((NvBool)(0 == 0)) and friends
            return int(e == "NV_TRUE")
        if not re.fullmatch(r"[A-Za-z_]\w*", e) or depth > 6:
            return None
        for d in self.defs(e, path, function_like=False):
            v = self.int_constant(d.body, d.path, depth + 1)
            if v is not None:
                return v
        return self.enum_values.get(e)


@dataclasses.dataclass
class StringValue:
    text: str
    literal: bool                   # at least one real string literal took part
    unresolved: list[str]           # macros left as {NAME}


def eval_string(expr: str, path: str, tables: Tables, depth: int = 0) -> StringValue | None:
    """Value of a string expression: literals and string macros, concatenated.

    Returns None when the expression is not a string constant (a variable, a
    conditional expression, pointer arithmetic...).
    """
    expr, _ = first_branch(expr)
    toks = [t for t in tokenize(expr) if t[0] != "ws"]
    parts = []
    literal = False
    unresolved = []
    i = 0
    while i < len(toks):
        kind, val = toks[i]
        if kind == "str":
            parts.append(decode_c_string(val))
            literal = True
            i += 1
        elif kind == "id":
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if nxt == ("punct", "("):
                # A function-like macro inside the format, e.g.
                # NV_PRINTF_ADD_PREFIX("...") or MAKE_NV_PRINTF_STR("...").
                close = _match_tok(toks, i + 1)
                if close < 0:
                    return None
                inner = "".join(v for _, v in toks[i + 2:close])
                value = None
                if depth < 8:
                    for d in tables.defs(val, path, function_like=True):
                        expanded = expand_macro(d, split_args(inner))
                        if expanded is None:
                            continue
                        r = eval_string(expanded, path, tables, depth + 1)
                        if r is not None and r.literal and not r.unresolved:
                            value = r
                            break
                if value is None:
                    parts.append("{%s}" % val)
                    unresolved.append(val)
                else:
                    parts.append(value.text)
                    literal = True
                i = close + 1
                continue
            s = tables.string_macro(val, path, depth + 1)
            if s is None:
                parts.append("{%s}" % val)
                unresolved.append(val)
            else:
                parts.append(s)
                literal = True
            i += 1
        elif kind == "punct" and val in "()":
            i += 1                                   # ("a" "b") is still a string
        else:
            return None
    if not parts:
        return None
    return StringValue("".join(parts), literal, unresolved)


def _match_tok(toks: list[tuple[str, str]], open_i: int) -> int:
    depth = 0
    for j in range(open_i, len(toks)):
        if toks[j] == ("punct", "("):
            depth += 1
        elif toks[j] == ("punct", ")"):
            depth -= 1
            if depth == 0:
                return j
    return -1


def expand_macro(d: MacroDef, args: list[str]) -> str | None:
    """Body of a function-like macro with its parameters replaced by args.

    Handles #param (stringizing), a ## b (pasting), __VA_ARGS__ / named
    variadic parameters, and the GNU ", ## __VA_ARGS__" comma swallowing.
    Returns None when the number of arguments does not fit.
    """
    params = d.params or []
    if args == [""] and not params:
        args = []
    if len(args) < len(params) or (len(args) > len(params) and d.variadic is None):
        return None
    mapping = dict(zip(params, args))
    va = args[len(params):]
    if d.variadic:
        mapping[d.variadic] = ", ".join(va)
    toks = tokenize(d.body)
    out: list[str] = []
    i = 0
    while i < len(toks):
        kind, val = toks[i]
        if kind == "punct" and val == "#":
            j = i + 1
            while j < len(toks) and toks[j][0] == "ws":
                j += 1
            if j < len(toks) and toks[j][0] == "id" and toks[j][1] in mapping:
                arg = mapping[toks[j][1]]
                out.append('"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"')
                i = j + 1
                continue
        if kind == "punct" and val == "##":
            # Drop whitespace before ## and glue to what follows.
            while out and out[-1].isspace():
                out.pop()
            j = i + 1
            while j < len(toks) and toks[j][0] == "ws":
                j += 1
            if j < len(toks) and toks[j][0] == "id" and toks[j][1] == d.variadic and not va:
                # ", ## __VA_ARGS__" with no variable arguments: drop the comma.
                if out and out[-1] == ",":
                    out.pop()
                i = j + 1
                continue
            out.append("\x00PASTE\x00")
            i = j
            continue
        if kind == "id" and val in mapping:
            out.append(mapping[val])
        else:
            out.append(val)
        i += 1
    return re.sub(r"\s*\x00PASTE\x00\s*", "", "".join(out))


# ---------------------------------------------------------------------------
# Enclosing function
# ---------------------------------------------------------------------------

def function_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of function bodies, found from their opening brace.

    The driver puts the opening brace of a function either alone in column 0
    (RM style) or at the end of a column-0 declaration line (Linux style); the
    body ends at the next '}' in column 0.  The name is the identifier right
    before the parenthesised parameter list that precedes the brace.
    """
    spans = []
    line_start = 0
    candidates = []
    for line in text.split("\n"):
        stripped = line.rstrip()
        if stripped == "{":
            candidates.append(line_start)
        elif (stripped.endswith("{") and line[:1] not in ("", " ", "\t", "#", "}")
              and "(" in line and "=" not in line.split("(")[0]):
            candidates.append(line_start + len(stripped) - 1)
        line_start += len(line) + 1
    closes = [m.start() for m in re.finditer(r"(?m)^\}", text)]
    for brace in candidates:
        name = _function_name_before(text, brace)
        if not name:
            continue
        k = bisect.bisect_right(closes, brace)
        end = closes[k] if k < len(closes) else len(text)
        spans.append((brace, end, name))
    return spans


def _function_name_before(text: str, brace: int) -> str | None:
    i = brace - 1
    # Skip whitespace and trailing qualifiers/attributes such as "const" or
    # NV_ATTRIBUTE_... between the parameter list and the brace.
    for _ in range(3):
        while i >= 0 and text[i].isspace():
            i -= 1
        if i >= 0 and text[i] == ")":
            break
        m = re.search(r"[A-Za-z_]\w*$", text[max(0, i - 80):i + 1])
        if not m:
            return None
        i -= len(m.group())
    if i < 0 or text[i] != ")":
        return None
    depth = 0
    while i >= 0:
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                break
        i -= 1
    i -= 1
    while i >= 0 and text[i].isspace():
        i -= 1
    m = re.search(r"[A-Za-z_~][\w:~]*$", text[max(0, i - 200):i + 1])
    if not m:
        return None
    name = m.group()
    if name in NOT_FUNCTION_NAMES:
        return None
    return name


# ---------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Row:
    level: str
    path: str
    line: int
    function: str
    fmt: str
    emitter: str
    code: str
    visibility: str
    prefix: str


@dataclasses.dataclass
class Call:
    """A call found in a macro body: callee name and the text between its parentheses."""
    callee: str
    argtext: str


@dataclasses.dataclass
class Wrapper:
    """A macro definition whose body calls a printer or another wrapper.

    significant  the macro's parameters that reach the level, format or code
                 argument of a printer (directly or through inner wrappers).
                 A call in the body that uses one of them prints something that
                 depends on where the macro is used, so it is listed at each
                 use; a call that uses none prints the same message wherever the
                 macro is used, so it is listed once, at the #define.
    """
    d: MacroDef
    calls: list[Call]
    significant: set[str] = dataclasses.field(default_factory=set)


# Wrapper macros whose messages only exist in debug builds of their module.
DEBUG_ONLY_WRAPPERS = {"_UVM_ASSERT_MSG": "debug-build"}


class Extractor:
    def __init__(self, repo: str, roots: Iterable[str], tables: Tables,
                 defines: dict[str, str]) -> None:
        self.repo = repo
        self.roots = list(roots)
        self.tables = tables
        self.defines = defines
        self.rows: set[Row] = set()
        self.skipped = collections.Counter()          # (reason, emitter) -> calls
        self.skip_examples: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
        self.below_warning = collections.Counter()    # emitter -> calls at info/notice/debug
        self.unresolved_macros = collections.Counter()
        self.wrappers: dict[str, list[Wrapper]] = collections.defaultdict(list)
        self.pr_fmt_prefix: dict[str, str] = {}

    # -- setup ---------------------------------------------------------------

    def _in_roots(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in self.roots)

    def visible(self, name: str, path: str) -> list[Wrapper]:
        """Definitions of wrapper name that code in path sees.

        A macro defined in a .c file exists only in that file; one defined in
        a header is taken to be visible everywhere.
        """
        ws = self.wrappers.get(name, ())
        same = [w for w in ws if w.d.path == path]
        if same:
            return same
        return [w for w in ws if not w.d.path.endswith((".c", ".cpp"))]

    def find_wrappers(self) -> None:
        """Find the wrapper macros and which of their parameters matter."""
        known = set(EMITTERS)
        candidates = [d for ds in self.tables.macros.values() for d in ds
                      if d.params is not None and d.name not in EMITTERS and self._in_roots(d.path)]
        changed = True
        while changed:
            changed = False
            for d in candidates:
                if d.name in self.wrappers and any(w.d is d for w in self.wrappers[d.name]):
                    continue
                if _calls_in(d.body, known - {d.name}):
                    self.wrappers[d.name].append(Wrapper(d, []))
                    known.add(d.name)
                    changed = True
        names = set(self.wrappers) | set(EMITTERS)
        for ws in self.wrappers.values():
            for w in ws:
                w.calls = [Call(n, a) for n, a in _calls_in(w.d.body, names - {w.d.name})]
        # Significant parameters, to a fixed point.
        changed = True
        while changed:
            changed = False
            for ws in self.wrappers.values():
                for w in ws:
                    params = set(w.d.params or ()) | ({w.d.variadic} if w.d.variadic else set())
                    if w.d.variadic:
                        params.add("__VA_ARGS__")
                    for c in w.calls:
                        for a in self.significant_args(c, w.d.path):
                            new = (_names_in(a) & params) - w.significant
                            if new:
                                w.significant |= new
                                changed = True
        # pr_fmt(fmt) in kernel-open/<module>/ gives pr_* calls of that module a prefix.
        for d in self.tables.macros.get("pr_fmt", ()):
            if d.params and d.path.startswith("kernel-open/"):
                body = expand_macro(d, ['""'])
                v = eval_string(body or "", d.path, self.tables)
                if v is not None and not v.unresolved:
                    self.pr_fmt_prefix["/".join(d.path.split("/")[:2]) + "/"] = v.text

    def significant_args(self, c: Call, path: str) -> list[str]:
        """The arguments of call c that decide what it prints (level, format, code)."""
        args = split_args(c.argtext)
        e = EMITTERS.get(c.callee)
        if e is not None:
            if e.level_search or e.inner_parens or e.kern_level:
                return args
            idx = set(e.level_args) | {e.fmt_arg}
            if e.code_arg is not None:
                idx.add(e.code_arg)
            if e.prefix_arg is not None:
                idx.add(e.prefix_arg)
        else:
            idx = set()
            for w in self.visible(c.callee, path):
                ps = w.d.params or []
                idx |= {i for i, p in enumerate(ps) if p in w.significant}
                if w.d.variadic and (w.d.variadic in w.significant
                                     or "__VA_ARGS__" in w.significant):
                    idx |= set(range(len(ps), max(len(ps), len(args))))
        out = [args[i] for i in sorted(idx) if i < len(args)]
        # An index past the written arguments is reached through __VA_ARGS__.
        if any(i >= len(args) for i in idx) and args:
            out.append(args[-1])
        return out

    def depends_on_params(self, c: Call, d: MacroDef, path: str) -> bool:
        params = set(d.params or ())
        if d.variadic:
            params |= {d.variadic, "__VA_ARGS__"}
        return any(_names_in(a) & params for a in self.significant_args(c, path))

    # -- per file ------------------------------------------------------------

    def scan_file(self, path: str, text: str, literals: list[tuple[int, int]]) -> None:
        names = _names_in(text) & (set(EMITTERS) | set(self.wrappers))
        if not names:
            return
        lit_starts = [s for s, _ in literals]
        dead = dead_spans(text)
        dead_starts = [s for s, _ in dead]
        defines = self._define_spans(text)
        def_starts = [s for s, _ in defines]
        funcs = function_spans(text)
        func_starts = [s for s, _, _ in funcs]
        line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

        def line_of(pos: int) -> int:
            return bisect.bisect_right(line_starts, pos)

        # Calls in code: listed where they are.
        pattern = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(map(re.escape, names))))
        for m in pattern.finditer(text):
            pos = m.start()
            name = m.group(1)
            if in_spans(pos, literals, lit_starts):
                continue
            if in_spans(pos, defines, def_starts):
                continue        # macro bodies: see below
            if name not in EMITTERS and not self.visible(name, path):
                continue
            if in_spans(pos, dead, dead_starts):
                self.skipped[("inside #if 0", name)] += 1
                continue
            if self._is_declaration(text, pos):
                continue
            open_idx = m.end() - 1
            close = match_paren(text, open_idx)
            where = "%s:%d" % (path, line_of(pos))
            if close < 0:
                self._skip("unbalanced parentheses", name, where)
                continue
            k = bisect.bisect_right(func_starts, pos) - 1
            func = funcs[k][2] if k >= 0 and pos < funcs[k][1] else ""
            self.process_call(path, line_of(pos), func, name, text[open_idx + 1:close], [], where)

        # Calls in macro bodies that print the same thing wherever the macro is
        # used: listed once, at the #define.
        for start, _ in defines:
            if in_spans(start, dead, dead_starts):
                continue
            line = line_of(start)
            d = next((x for x in self.tables.macros_at.get((path, line), ())), None)
            if d is None or d.name in EMITTERS:
                continue
            for callee, argtext in _calls_in(d.body, names - {d.name}):
                if callee not in EMITTERS and not self.visible(callee, path):
                    continue
                c = Call(callee, argtext)
                if self.depends_on_params(c, d, path):
                    continue
                where = "%s:%d" % (path, line)
                self.process_call(path, line, "", callee, argtext, [d.name], where)

    @staticmethod
    def _define_spans(text: str) -> list[tuple[int, int]]:
        spans = []
        for m in re.finditer(r"(?m)^[ \t]*#[ \t]*define\b(?:[^\n\\]|\\.|\\\n)*", text):
            spans.append((m.start(), m.end()))
        return spans

    @staticmethod
    def _is_declaration(text: str, pos: int) -> bool:
        """True for "void nv_printf(" and other declarations/definitions of a printer."""
        j = pos - 1
        while j >= 0 and text[j] in " \t\r\n":
            j -= 1
        if j < 0:
            return False
        if text[j] == "*":
            return True
        if text[j].isalnum() or text[j] == "_":
            m = re.search(r"[A-Za-z_]\w*$", text[max(0, j - 60):j + 1])
            return bool(m) and m.group() not in C_KEYWORDS_BEFORE_CALL
        return False

    # -- one call ------------------------------------------------------------

    def _skip(self, reason: str, emitter: str, where: str) -> None:
        self.skipped[(reason, emitter)] += 1
        ex = self.skip_examples[(reason, emitter)]
        if len(ex) < 5:
            ex.append(where)

    def process_call(self, path: str, line: int, func: str, name: str, argtext: str,
                     chain: list[str], where: str) -> None:
        argtext = argtext.replace("\\\n", "")       # backslash-newline splices lines
        argtext, _ = first_branch(argtext)
        if name in EMITTERS:
            self.handle_emitter(path, line, func, name, argtext, chain, where)
            return
        if name in chain or len(chain) > 8:
            return                      # a macro does not expand inside itself
        args = split_args(argtext)
        expanded_any = False
        seen = set()
        for w in self.visible(name, path):
            if w.d.body in seen:
                continue
            seen.add(w.d.body)
            if len(args) < len(w.d.params or ()) or (
                    len(args) > len(w.d.params or ()) and not w.d.variadic
                    and args != [""]):
                continue
            expanded_any = True
            for c in w.calls:
                if not self.depends_on_params(c, w.d, path):
                    continue            # listed at the wrapper's #define
                if c.callee not in EMITTERS and not self.visible(c.callee, path):
                    continue
                # Substitute this use's arguments into the call.
                one = MacroDef(w.d.name, w.d.params, w.d.variadic,
                               "%s(%s)" % (c.callee, c.argtext), w.d.path, w.d.line)
                text = expand_macro(one, args)
                if text is None:
                    continue
                o = text.index("(")
                close = match_paren(text, o)
                if close < 0:
                    continue
                self.process_call(path, line, func, c.callee, text[o + 1:close],
                                  chain + [name], where)
        if not expanded_any:
            self._skip("wrapper macro: argument count does not match", name, where)

    def handle_emitter(self, path: str, line: int, func: str, name: str, argtext: str,
                       chain: list[str], where: str) -> None:
        e = EMITTERS[name]
        args = split_args(argtext)
        if e.inner_parens:
            if len(args) != 1 or not args[0].startswith("("):
                self._skip("argument list not in double parentheses", name, where)
                return
            args = split_args(args[0][1:match_paren(args[0], 0)])
        emitter_label = ">".join(chain + [name])

        # ---- level(s) and position of the format -----------------------------
        fmt_index = e.fmt_arg
        conditional = False
        if e.level_search:
            args = self._expand_object_args(args, path)
            level = None
            fmt_index = None
            for i, a in enumerate(args):
                lv = self._read_level(a, e.levels, path)
                if lv is not None:
                    level, conditional = lv
                    fmt_index = i + 1
                    break
            if fmt_index is None:
                self._skip("level not a constant", emitter_label, where)
                return
        elif e.kern_level:
            level = "none"
            if args:
                mm = re.match(r"\s*(KERN_[A-Z]+)\b\s*", args[0])
                if mm and mm.group(1) in e.levels:
                    level = e.levels[mm.group(1)]
                    args = [args[0][mm.end():]] + args[1:]
            if level == "none":
                self.below_warning[emitter_label + " (no KERN_ level)"] += 1
                return
        elif e.fixed_level:
            level = e.fixed_level
        else:
            found = []
            for li in e.level_args:
                if li >= len(args):
                    break
                lv = self._read_level(args[li], e.levels, path)
                if lv is None:
                    found = None
                    break
                found.append(lv)
            if not found:
                self._skip("level not a constant", emitter_label, where)
                return
            levels = [lv for lv, _ in found]
            conditional = len(e.level_args) > 1 or any(c for _, c in found)
            level = _most_severe(levels)
        if level is None:
            self.below_warning[emitter_label] += 1
            return

        # ---- format ---------------------------------------------------------------
        if fmt_index is None or fmt_index >= len(args):
            self._skip("no format argument", emitter_label, where)
            return
        value = eval_string(args[fmt_index], path, self.tables)
        if value is None or not value.literal:
            self._skip("format not a string constant", emitter_label, where)
            return
        if not value.text:
            self._skip("empty format (prints nothing)", emitter_label, where)
            return
        for u in value.unresolved:
            self.unresolved_macros[u] += 1
        fmt = value.text + e.suffix

        # ---- prefix -------------------------------------------------------------
        prefix = e.prefix
        if e.prefix_by_level:
            prefix = e.prefix_by_level[level]
        if e.prefix_arg is not None and e.prefix_arg < len(args):
            pv = eval_string(args[e.prefix_arg], path, self.tables)
            prefix += pv.text if pv is not None else "<%s>" % args[e.prefix_arg].strip()
        if name.startswith("pr_"):
            for module_dir, pfx in self.pr_fmt_prefix.items():
                if path.startswith(module_dir):
                    prefix = pfx + prefix
        if name == "NV_PRINTF_EX" and fmt.startswith("NVRM: "):
            # NV_PRINTF_EX(..., NV_PRINTF_ADD_PREFIX(fmt)) prints like NV_PRINTF.
            fmt = fmt[len("NVRM: "):]
            prefix = RM_PREFIX

        # ---- Xid / SXid number ------------------------------------------------------
        code = ""
        if e.code_arg is not None and e.code_arg < len(args):
            expr = args[e.code_arg]
            if e.code_from_context:
                mm = re.search(r"\.xid\s*=\s*([^,}]+)", expr)
                expr = mm.group(1) if mm else expr
            v = self.tables.int_constant(expr, path)
            code = str(v) if v is not None else "{%s}" % " ".join(expr.split())[:60]

        visibility = "conditional" if conditional else e.visibility_for(level)
        for m in chain:
            visibility = DEBUG_ONLY_WRAPPERS.get(m, visibility)
        self.rows.add(Row(level, path, line, func, fmt, emitter_label, code, visibility, prefix))

    def _read_level(self, expr: str, levels: dict, path: str,
                    depth: int = 0) -> tuple[str | None, bool] | None:
        """Level named by expr: (level or None for below warning, conditional?).

        A plain level token, a macro standing for one, or an expression such as
        "bQuiet ? LEVEL_INFO : LEVEL_ERROR" (then the most severe level, marked
        conditional).  None when no level token appears at all.
        """
        e = expr.strip()
        while e.startswith("(") and match_paren(e, 0) == len(e) - 1:
            e = e[1:-1].strip()
        if e in levels:
            return levels[e], False
        if e in self.defines:
            return self._read_level(self.defines[e], levels, path, depth + 1)
        if re.fullmatch(r"[A-Za-z_]\w*", e) and depth < 4:
            results = set()
            for d in self.tables.defs(e, path, function_like=False):
                r = self._read_level(d.body, levels, d.path, depth + 1)
                if r is not None:
                    results.add(r[0])
            if len(results) == 1:
                return results.pop(), False
            if results:
                return _most_severe(list(results)), True
            return None
        found = [levels[t] for t in re.findall(r"[A-Za-z_]\w*|0[xX][0-9a-fA-F]+", e) if t in levels]
        if found:
            return _most_severe(found), True
        return None

    def _expand_object_args(self, args: list[str], path: str) -> list[str]:
        """Replace arguments that are object-like macros listing several values
        (NVLINK_DBG_ERRORS is "NVLINK_DBG_WHERE, NVLINK_DBG_LEVEL_ERRORS")."""
        out = []
        for a in args:
            if re.fullmatch(r"[A-Za-z_]\w*", a):
                ds = self.tables.defs(a, path, function_like=False)
                if ds and "," in ds[0].body:
                    out.extend(split_args(ds[0].body))
                    continue
            out.append(a)
        return out


def _calls_in(body: str, names: set[str]) -> list[tuple[str, str]]:
    """(callee, argument text) of the calls to names in a macro body, in order."""
    wanted = _names_in(body) & names
    if not wanted:
        return []
    out = []
    pat = re.compile(r"\b(%s)\s*\(" % "|".join(sorted(map(re.escape, wanted))))
    for m in pat.finditer(body):
        if _inside_literal(body, m.start()):
            continue
        o = m.end() - 1
        c = match_paren(body, o)
        if c < 0:
            continue
        out.append((m.group(1), body[o + 1:c]))
    return out


def _inside_literal(text: str, pos: int) -> bool:
    i = 0
    while i < pos:
        c = text[i]
        if c in "\"'":
            j = skip_literal(text, i)
            if j > pos:
                return True
            i = j
        else:
            i += 1
    return False


def _names_in(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


_SEVERITY = {"error": 2, "warning": 1, None: 0}


def _most_severe(levels: list) -> str | None:
    return max(levels, key=lambda lv: _SEVERITY[lv])


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def walk(repo: str, roots: Iterable[str]) -> list[str]:
    paths = []
    for root in roots:
        base = os.path.join(repo, root)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXTENSIONS):
                    paths.append(os.path.relpath(os.path.join(dirpath, f), repo))
    return paths


def git_info(repo: str) -> tuple[str, str, str]:
    """(commit, newest tag reachable, commit date) of the checkout, where git knows them."""
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(["git", "-C", repo, *cmd], capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""
    return run("rev-parse", "HEAD"), run("describe", "--tags", "--abbrev=0"), \
        run("log", "-1", "--format=%cs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Output columns"):],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", help="checkout of open-gpu-kernel-modules (a work tree)")
    ap.add_argument("-o", "--output", help="TSV file to write (default: standard output)")
    ap.add_argument("--commit", help="commit hash to record (default: asked from git in REPO)")
    ap.add_argument("--tag", help="release tag to record (default: asked from git in REPO)")
    ap.add_argument("--date", help="commit date to record (default: asked from git in REPO)")
    ap.add_argument("--root", action="append", dest="roots",
                    help="folder of REPO to walk; repeatable (default: %s)" % ", ".join(DEFAULT_ROOTS))
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="force a level macro to a value, e.g. NV_DBG_EVENTINFO=NV_DBG_INFO")
    ap.add_argument("--stats", action="store_true",
                    help="print counts, skipped calls and unexpanded macros to standard error")
    args = ap.parse_args(argv)

    repo = os.path.abspath(args.repo)
    roots = args.roots or list(DEFAULT_ROOTS)
    for r in roots:
        if not os.path.isdir(os.path.join(repo, r)):
            ap.error("%s has no folder %s; is it an open-gpu-kernel-modules checkout?" % (repo, r))
    commit, tag, date = git_info(repo)
    commit = args.commit or commit or "unknown"
    tag = args.tag or tag or "unknown"
    date = args.date or date or "unknown"
    defines = dict(d.split("=", 1) for d in args.define)

    tables = Tables()
    files = []
    for p in walk(repo, roots):
        with open(os.path.join(repo, p), encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
        text, literals = strip_comments(raw)
        tables.add_file(p, text)
        files.append((p, text, literals))

    ex = Extractor(repo, roots, tables, defines)
    ex.find_wrappers()
    for p, text, literals in files:
        ex.scan_file(p, text, literals)

    # A total order, so that the same tree always gives the same file.
    rows = sorted(ex.rows, key=lambda r: (r.path, r.line, r.emitter, r.fmt, r.code, r.level,
                                          r.function, r.visibility, r.prefix))
    out = open(args.output, "w", encoding="utf-8", newline="\n") if args.output else sys.stdout
    try:
        out.write("# Error- and warning-level kernel-log messages of the NVIDIA GPU driver,\n")
        out.write("# extracted from its source by scripts/extract-driver-messages.py.\n")
        out.write("# repository: https://github.com/NVIDIA/open-gpu-kernel-modules\n")
        out.write("# commit: %s\n# tag: %s\n# date: %s\n" % (commit, tag, date))
        out.write("# folders: %s\n" % " ".join(roots))
        out.write("# checkout: git clone https://github.com/NVIDIA/open-gpu-kernel-modules <checkout>"
                  " && git -C <checkout> checkout %s\n" % commit)
        out.write("# regenerate: scripts/extract-driver-messages.py <checkout> --commit %s --tag %s"
                  " --date %s -o testdata/driver_messages/open-gpu-kernel-modules.tsv\n"
                  % (commit, tag, date))
        out.write("# format and prefix: backslash, tab, newline, CR written as \\\\ \\t \\n \\r\n")
        out.write("level\tpath\tline\tfunction\tformat\temitter\tcode\tvisibility\tprefix\n")
        for r in rows:
            out.write("\t".join([r.level, r.path, str(r.line), r.function, tsv_escape(r.fmt),
                                 r.emitter, r.code, r.visibility, tsv_escape(r.prefix)]) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()

    if args.stats:
        err = sys.stderr
        by_level = collections.Counter(r.level for r in rows)
        print("rows: %d (%s)" % (len(rows), ", ".join("%s %d" % kv for kv in sorted(by_level.items()))),
              file=err)
        print("rows by emitter:", file=err)
        for k, v in collections.Counter(r.emitter.split(">")[-1] for r in rows).most_common():
            print("  %6d  %s" % (v, k), file=err)
        print("wrapper macros: %d" % len(ex.wrappers), file=err)
        print("calls below warning level (not extracted):", file=err)
        for k, v in ex.below_warning.most_common():
            print("  %6d  %s" % (v, k), file=err)
        print("calls skipped:", file=err)
        for (reason, em), v in ex.skipped.most_common():
            print("  %6d  %-45s %s   e.g. %s" % (v, reason, em,
                                                 " ".join(ex.skip_examples.get((reason, em), [])[:3])),
                  file=err)
        print("macros left unexpanded in formats:", file=err)
        for k, v in ex.unresolved_macros.most_common():
            print("  %6d  {%s}" % (v, k), file=err)
        amb = {k: v for k, v in tables.ambiguous_used.items()}
        if amb:
            print("string macros with several definitions (first one used):", file=err)
            for k in sorted(amb):
                print("  %s: %s" % (k, " | ".join(sorted(repr(x) for x in amb[k]))), file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
