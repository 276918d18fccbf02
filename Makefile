# escapement — see README.md. Every target works on a fresh machine with Go.
GO        ?= go
PKGS      ?= ./...
STATICCHECK_VERSION ?= v0.8.2
GOCYCLO_VERSION ?= v0.6.0

.PHONY: all test bench lint demo fmt build fuzz soak mutate explore

all: lint test

build:
	$(GO) build $(PKGS)

# The README's test command (CI runs it through .ci/run): everything under
# the race detector. No verdict depends on luck or load: the teeth tests
# search fixed seeds and shrink by a count of runs (sim/teeth_test.go), the
# properties that must hold draw random seeds (they cannot fail while the
# code is right), and a test waits for events, bounded only to stop a hang.
test:
	@cc="$$($(GO) env CC)"; command -v "$${cc%% *}" >/dev/null || { \
		echo "make test runs the race detector, which needs cgo and a C compiler ('$$cc' is not installed): apt install gcc (README, Quick start)" >&2; exit 2; }
	$(GO) vet $(PKGS)
	$(GO) test -race $(PKGS)

# Benchmarks; quote medians of -count 5 (benchstat-friendly output).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

# Cyclomatic complexity (gocyclo): no function above 15 in the packages of
# CYCLO_DIRS (docs/development.md, "Complexity"); tests are left out
# (CYCLO_IGNORE). Widen CYCLO_DIRS as packages are brought under the bound.
CYCLO_DIRS   ?= cmd/escapement adapters/ports adapters/session adapters/agent adapters/config adapters/profiles adapters/protocol adapters/console adapters/approval internal/headless internal/simcli examples sim
CYCLO_IGNORE ?= _test\.go$$
lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	$(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION) -over 15 -ignore '$(CYCLO_IGNORE)' $(CYCLO_DIRS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The main job on the embedded default: the built-in scenario suite in the simulator.
demo:
	$(GO) run ./cmd/escapement sim

# Fuzz targets, a few seconds each (CI runs this; set FUZZTIME for longer).
FUZZTIME ?= 8s
fuzz:
	$(GO) test ./sim/scenario -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 50x
	$(GO) test ./kernel -run '^$$' -fuzz '^FuzzAppendJSONString$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 50x
	$(GO) test ./sim -run '^$$' -fuzz '^FuzzWorld$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 50x

# The long run: the property suites at SOAK_CHECKS checks each (ten
# properties: 10 x 10,000 = 100,000 checks by default), then a sweep of
# SOAK_WORLDS generated worlds at depth 6, then the crash property on
# SOAK_CRASH_WORLDS worlds (each crashed after one to three drawn steps and
# rebuilt from its log) and every embedded scenario crashed after every
# step (docs/durable.md). Not part of CI.
# The properties' verbose output goes to soak.log: a failure prints all of it
# (rapid's reproduce lines and the failing world's file) and fails the
# target; a pass prints only the summary lines.
SOAK_CHECKS ?= 10000
SOAK_WORLDS ?= 100000
SOAK_CRASH_WORLDS ?= 100000
SOAK_APPROVAL_CHECKS ?= 5000
soak:
	RAPID_CHECKS=$(SOAK_CHECKS) $(GO) test ./sim -count 1 -timeout 0 -v \
		-run '^(TestWorlds|TestWorldsPermuted|TestRerunDeterminism|TestStateMachine)$$' > soak.log \
		|| { cat soak.log; echo "soak: a property failed; the whole log (with the reproduce lines) is soak.log" >&2; exit 1; }
	grep -E '^(=== RUN|--- |ok|FAIL|PASS)|rapid\]' soak.log
	$(GO) run ./cmd/escapement sim sweep --seeds $(SOAK_WORLDS) --depth 6
	CRASH_STRIDE=1 RAPID_CHECKS=$(SOAK_CRASH_WORLDS) $(GO) test ./sim -count 1 -timeout 0 -v \
		-run '^(TestCrashAnyStep|TestCrashEveryStepScenarios)$$' > soak-crash.log \
		|| { cat soak-crash.log; echo "soak: the crash property failed; the whole log is soak-crash.log" >&2; exit 1; }
	grep -E '^(=== RUN|--- |ok|FAIL|PASS)|rapid\]|crashes' soak-crash.log
	RAPID_CHECKS=$(SOAK_APPROVAL_CHECKS) $(GO) test ./sim -count 1 -timeout 0 -v \
		-run '^TestCrashApprovals$$' > soak-approvals.log \
		|| { cat soak-approvals.log; echo "soak: the crash property with approvals failed; the whole log is soak-approvals.log" >&2; exit 1; }
	grep -E '^(=== RUN|--- |ok|FAIL|PASS)|rapid\]' soak-approvals.log

# Exhaustive exploration (not in CI; docs/oracle.md, "Exhaustive exploration"):
# every small-scope world (trees of at most 3 agents, every sequence of at
# most 4 inputs), every embedded scenario and the everyday family (how
# exploration scales), each to the end.
explore:
	$(GO) run ./cmd/escapement sim explore --small-scope
	$(GO) run ./cmd/escapement sim explore
	$(GO) run ./cmd/escapement sim explore --family

# Mutation testing (not in CI: about 30 s per mutant here, so hours for all
# of them). Plants one small bug at a time in MUTATE_PKGS and reports which
# test layer caught it: for kernel/ and fsm/ the simulator layers and the
# unit tests separately, for adapters/ and cmd/ the package's tests, and for
# the internal packages the edge is made of (redaction, the files a user
# names, ${NAME} expansion, bounded reads, text cuts) their own tests. A rerun
# with the same MUTATE_OUT continues where the last one stopped.
# MUTATE_SAMPLE=N judges a deterministic sample of N (seed MUTATE_SEED);
# MUTATE_JOBS defaults to half the cores (use 1 on a loaded machine).
# See docs/development.md, "Mutation testing".
MUTATE_EDGE_INTERNAL ?= ./internal/edge ./internal/redact ./internal/userfile ./internal/envexpand \
	./internal/lineread ./internal/textcut ./internal/termtext ./internal/outputschema
MUTATE_PKGS   ?= ./kernel ./fsm ./adapters/... ./cmd/... $(MUTATE_EDGE_INTERNAL)
MUTATE_SAMPLE ?= 0
MUTATE_SEED   ?= 1
MUTATE_JOBS   ?=
MUTATE_OUT    ?= mutate-out/mutants.jsonl
mutate:
	$(GO) run ./internal/mutate/cmd/mutate --sample $(MUTATE_SAMPLE) --seed $(MUTATE_SEED) \
		$(if $(MUTATE_JOBS),--jobs $(MUTATE_JOBS)) --out $(MUTATE_OUT) $(MUTATE_PKGS)
