// Package oracle judges a simulated run by the specification,
// docs/semantics.md: after every step it checks the invariants I1–I25 and
// liveness, counts the reachability probes, and at the end judges the
// scenario's expectations.
//
// It sees only what the simulator publishes of the agent loop under test —
// each step's event and effects, the lifecycle records among them, and
// through Tree every agent's View, its state, the lifecycle log and name
// lookups — never the kernel's internals, and states the rules it judges
// by itself (its own statement of the state machine in fsm_spec.go, its
// own transcript rules). TestOracleSeesOnlyWhatIsPublished holds its
// imports to that, so a broken agent loop cannot hide from it.
//
// The layout is TigerBeetle's: one shadow model of what was observed
// (oracle_model.go, updated by oracle_step.go, oracle_effects.go and
// oracle_history.go), which records and judges nothing; one checker per
// group of invariants (check_*.go), each judging the step the model read;
// the probes (probes.go) as a separate observer. invariant.go is the one
// list of invariants with their statements and checker files.
// docs/development.md, "Adding an invariant", says where a new one goes.
package oracle
