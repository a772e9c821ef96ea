"""PreToolUse: refuse direct edits of the state dir and Bash commands that write into it.

``.codemem/`` holds the memory ledger and the code index, which must only change through
codemem. An Edit/Write/MultiEdit/NotebookEdit of a path inside it, or a Bash command that would
write there (rm, mv, cp into it, redirection, ``sed -i``, ``sqlite3`` without ``-readonly`` …),
gets ``permissionDecision: "deny"`` with the reason; everything else is allowed silently.
Standard library only (see ``query_server.hooks.dispatch``).
"""

import os

from query_server.hooks.common import Project, in_state_dir

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
GUARD_REASON = (
    "{what} — .codemem/ holds codemem's memory ledger and code index, which must only change through codemem: "
    "use the memory tools (memory_add, memory_update, memory_delete, import_memory) or `codemem memory …`, and "
    "`codemem index` / index_file for the code index."
)


def pre_tool_use(project: Project, payload: dict) -> dict | None:
    """Deny direct edits of the state dir and Bash commands that write into it; allow the rest silently."""
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input") or {}
    if not isinstance(tool_input, dict):
        return None
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    what = None
    if tool in EDIT_TOOLS:
        raw = tool_input.get("file_path") or tool_input.get("notebook_path")
        if isinstance(raw, str) and raw and in_state_dir(project, raw, cwd):
            what = f"{tool} of {raw} refused"
    elif tool == "Bash":
        command = tool_input.get("command")
        if isinstance(command, str) and _might_touch_state(project, command):
            found = _bash_violation(project, command, cwd)
            if found:
                what = f"Bash command refused: {found}"
    if what is None:
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "codemem: " + GUARD_REASON.format(what=what),
        }
    }


def _might_touch_state(project: Project, command: str) -> bool:
    """A cheap pre-check: only commands that name the state dir are parsed."""
    names = {".codemem", os.path.basename(project.state_dir), project.state_dir}
    return any(name and name in command for name in names)


_WRAPPERS = {"sudo", "env", "command", "nohup", "time", "nice", "ionice", "doas", "builtin", "exec", "stdbuf", "timeout"}
_WRITE_ANY = {"rm", "rmdir", "unlink", "shred", "truncate", "touch", "chmod", "chown", "chgrp", "ln", "mkdir", "tee", "mv", "srm"}
_COPY = {"cp", "install", "rsync", "scp"}
_IN_PLACE = {"sed", "gsed", "perl", "ruby"}
_SQL_WRITE = r"(?i)\b(insert|update|delete|drop|create|alter|replace|vacuum|reindex|attach|pragma\s+\w+\s*=)\b|\.(restore|import|read)\b"
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}


def _tokens(command: str) -> list[str]:
    import shlex

    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return command.replace(";", " ; ").replace("|", " | ").replace(">", " > ").split()


def _bash_violation(project: Project, command: str, cwd: str | None, depth: int = 0) -> str | None:
    """What a Bash command would change inside the state dir, or None (only commands that name it get here:
    ``re`` is imported here, not at every PreToolUse)."""
    import re

    tokens = _tokens(command)
    segments: list[tuple[list[str], list[str], str]] = []  # (words, output redirection targets, operator after)
    words: list[str] = []
    targets: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token and all(ch in ";&|()<>" for ch in token):
            if ">" in token or "<" in token:
                target = tokens[index + 1] if index + 1 < len(tokens) else ""
                if ">" in token and not (token.endswith("&") and (target.isdigit() or target == "-")):
                    targets.append(target)
                index += 2  # an input redirection only reads
                continue
            segments.append((words, targets, token))
            words, targets = [], []
        else:
            words.append(token)
        index += 1
    segments.append((words, targets, ""))

    for position, (words, targets, _op) in enumerate(segments):
        hit = next((t for t in targets if in_state_dir(project, t, cwd)), None)
        if hit:
            return f"redirecting output into {hit}"
        while words and (
            re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in _WRAPPERS or words[0].startswith("-")
            or re.fullmatch(r"\d+(\.\d+)?[smhd]?", words[0])
        ):
            words = words[1:]
        if not words:
            continue
        name = os.path.basename(words[0])
        args = words[1:]
        paths = [a for a in args if not a.startswith("-")]
        if name in _SHELLS and "-c" in args and depth < 2:
            script_at = args.index("-c") + 1
            if script_at < len(args):
                found = _bash_violation(project, args[script_at], cwd, depth + 1)
                if found:
                    return found
        if name in _WRITE_ANY:
            hit = next((p for p in paths if in_state_dir(project, p, cwd)), None)
            if hit:
                return f"`{name}` on {hit}"
        elif name in _COPY:
            target = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--target-directory")), None)
            target = target or next((a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")), None)
            target = target or (paths[-1] if len(paths) >= 2 else None)
            if target and in_state_dir(project, target.split(":", 1)[-1] if name in ("rsync", "scp") else target, cwd):
                return f"`{name}` into {target}"
        elif name in _IN_PLACE and any(a == "--in-place" or re.match(r"^-[a-zA-Z]*i", a) for a in args):
            hit = next((p for p in paths if in_state_dir(project, p, cwd)), None)
            if hit:
                return f"`{name} -i` on {hit}"
        elif name == "dd":
            hit = next((a[3:] for a in args if a.startswith("of=") and in_state_dir(project, a[3:], cwd)), None)
            if hit:
                return f"`dd` writing {hit}"
        elif name in ("sqlite3", "sqlite"):
            databases = [p for p in paths if in_state_dir(project, p, cwd)]
            if databases and "-readonly" not in args:
                sql = " ".join(paths[paths.index(databases[0]) + 1 :])
                if not sql.strip() or re.search(_SQL_WRITE, sql) or re.search(_SQL_WRITE, command):
                    return f"`sqlite3` on {databases[0]} (read-only queries need -readonly and the SQL as an argument)"
        elif name == "find" and ("-delete" in args or any(
            a in ("-exec", "-execdir", "-ok") and i + 1 < len(args) and os.path.basename(args[i + 1]) in _WRITE_ANY | _COPY
            for i, a in enumerate(args)
        )):
            roots = []
            for a in args:
                if a.startswith("-") or a in ("!", "("):
                    break
                roots.append(a)
            hit = next((p for p in roots if in_state_dir(project, p, cwd)), None)
            if hit:
                return f"`find … -delete/-exec` under {hit}"
        elif name == "xargs":
            rest = [a for a in args if not a.startswith("-")]
            if rest and os.path.basename(rest[0]) in _WRITE_ANY | _COPY:
                feeding: list[str] = []  # the words of the commands piped into xargs
                j = position
                while j > 0 and segments[j - 1][2] in ("|", "|&"):
                    feeding += segments[j - 1][0]
                    j -= 1
                hit = next((w for w in feeding if not w.startswith("-") and in_state_dir(project, w, cwd)), None)
                if hit:
                    return f"`xargs {os.path.basename(rest[0])}` on paths under {hit}"
        elif name in ("cd", "pushd") and paths:  # later commands run there
            target = os.path.expanduser(paths[0])
            cwd = os.path.normpath(target if os.path.isabs(target) else os.path.join(cwd or str(project.root), target))
    return None
