// Package proc starts the child processes of tools (the shell tool, and any
// server a tool launches) so that nothing they start outlives them, and so
// that they never see the API key.
//
// Start runs a command as the leader of its own process group. A cancel
// sends SIGINT to the group and, after a grace period, the hard kill; when
// the command ends, by itself or by a signal, everything it left running is
// killed, and only then does Wait return.
//
// On Linux, a process that leaves the group (setsid, a daemon's double
// fork, even one that clears its environment) is still found: Start puts a
// small helper between this process and the command — this same
// executable, re-run through /proc/self/exe — which makes itself a child
// subreaper (PR_SET_CHILD_SUBREAPER) and starts the command as its only
// child. The kernel re-parents every orphan of the command's tree to the
// helper instead of init, so the helper's children are exactly this call's
// processes: it reaps them, and at the end kills them until none is left,
// signalling only its own unreaped children (whose pids cannot be reused).
// One helper per call keeps parallel calls apart with no bookkeeping, and
// this process's own children (and os/exec's waits for them) are never
// touched. The helper also kills the tree if this process dies (its
// parent-death signal). Escapes that remain: a process handed to another
// supervisor (systemd-run, at, a container runtime, ssh to a host), and one
// in uninterruptible sleep, which dies when it wakes (Wait waits for it).
// A per-call cgroup would also catch the first kind but needs a writable,
// delegated cgroup v2 subtree, which containers and CI machines often lack.
//
// On macOS there is no subreaper: only the process group is signalled and
// killed, and a descendant that left it runs on. There is no parent-death
// signal either: if escapement is killed outright, a running command
// survives it.
//
// The environment policy (EnvPolicy) withholds the API key and every
// secret-looking variable unless named; see docs/live.md, "The tools' environment".
package proc
