"""The sandbox's generated ``/etc/passwd`` and ``/etc/group`` are readable by the kernel's own
user (issue 27, item 4), so ``pwd.getpwuid()`` and what calls it (``getpass.getuser()``,
``os.path.expanduser`` without ``$HOME``, some of matplotlib's and DuckDB's paths) work in a
cell. They hold nothing secret; they stay read-only."""

from __future__ import annotations

from turnstream.notebook import Kernel


async def test_a_cell_reads_its_own_user_and_group_and_cannot_change_them() -> None:
    k = Kernel()
    try:
        r = await k.execute("import getpass, grp, os, pwd, stat\n"
                            "me = pwd.getpwuid(os.getuid())\n"
                            "(me.pw_name, me.pw_dir, getpass.getuser(), grp.getgrgid(os.getgid()).gr_name,\n"
                            " oct(stat.S_IMODE(os.stat('/etc/passwd').st_mode)), os.access('/etc/passwd', os.W_OK))")
        assert r.outputs == [{"type": "text", "text": "('notebook', '/home/notebook', 'notebook', 'notebook', "
                                                      "'0o444', False)"}], r.outputs
    finally:
        await k.aclose()
