package sim

// BrokenLoop is a deliberately broken agent loop for one failure of the
// catalogue, exported to the property suites (package sim_test), which run
// it against random worlds. Test code only.
type BrokenLoop struct {
	Scenario  string
	Failure   string
	Invariant string
	Core      CoreFactory
}

// BrokenLoops returns one broken loop per F-bug (F13 has two).
func BrokenLoops() []BrokenLoop { return brokenLoops() }
