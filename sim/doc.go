// Package sim is escapement's deterministic simulator: a virtual clock with
// an event queue ordered by (virtual time, insertion sequence), a scripted
// world (models, tools, faults, user inputs), and JSON Lines traces with
// their SHA-256. It runs scenarios in the format of sim/scenario, and hands
// every step to the oracle of sim/oracle, which checks the invariants of
// docs/semantics.md after each: the engine publishes each step's event
// and effects and, through Core (an oracle.Tree), what the agent loop
// shows of its agents; it checks itself only what needs the engine — a run
// twice (I6, Recheck) and a crashed host rebuilt from its log (I24).
//
// Nothing here reads the wall clock, uses global randomness, starts a
// goroutine or lets map order reach an output: every random choice comes from
// the scenario's seed through a PRNG the run owns, so the same scenario and
// seed give byte-identical traces (I6).
//
// # Using it
//
// scenario.Load (or LoadFile, LoadPaths, LoadFS) reads a scenario and Run
// runs it to the end, returning a Result with every Violation; Example runs
// one from a string and Example_violation shows a failed check. A
// scenario.Scenario is a plain value, so
// a program can also build one, or draw random ones with sim/gen (whose
// Example_property is a rapid property test over a program's own agent
// scripts), and sweep many seeds with sim/sweep. New returns a Sim to drive
// by hand (Input, Advance, Step, Deliver: a rapid state-machine test does),
// and Options.Core runs the oracle against an agent loop other than the
// kernel, through the Core interface. Options.CrashAt crashes the host after
// given steps (Options.Durable, or Sim.Recover when driving by hand): the
// kernel is rebuilt from the host's write-ahead log, recovered, and the run
// goes on (docs/durable.md, "Proof in the simulator").
//
// docs/scenarios.md documents the scenario format and the CLI (escapement sim);
// docs/semantics.md is the specification the oracle checks, organised by
// invariant.
package sim
