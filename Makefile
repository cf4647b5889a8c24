# crush — build, test, benchmark, install.
# Where `make install` puts crush: /usr/local for root, ~/.local for anyone else.
PREFIX ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)
DESTDIR ?=
CARGO ?= cargo
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
BIN := $(TARGET_DIR)/release/crush
MUSL_TRIPLE ?= x86_64-unknown-linux-musl
GLIBC_TRIPLE ?= x86_64-unknown-linux-gnu
# The cargo profile of the static builds (CI builds its smoke binary with a lighter one).
STATIC_PROFILE ?= release
STATIC_BIN := $(TARGET_DIR)/$(MUSL_TRIPLE)/$(STATIC_PROFILE)/crush

.PHONY: all build test bench lint install install-check uninstall static static-glibc static-test docs clean

all: build

build:
	$(CARGO) build --release --locked

test:
	$(CARGO) test --locked

# Median wall time and peak RSS of the release binary against the fake model server.
bench:
	CRUSH_BENCH=1 $(CARGO) test --release --locked --test bench -- --nocapture

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

# Regenerate the man page (man/crush.1.template filled from the flag table) and the completions
# (a test checks the committed copies match).
docs: build
	$(BIN) --generate man > man/crush.1
	$(BIN) --generate bash > completions/crush.bash
	$(BIN) --generate zsh > completions/_crush
	$(BIN) --generate fish > completions/crush.fish

# Checked before the build (minutes), not after it: PREFIX (or the first directory of it that
# exists) must be writable.
install-check:
	@d="$(DESTDIR)$(PREFIX)"; while [ ! -e "$$d" ]; do d=$$(dirname "$$d"); done; \
	  if [ ! -w "$$d" ]; then \
	    echo "make install: cannot write to $$d; run as root, or choose another place: make install PREFIX=$$HOME/.local" >&2; \
	    exit 1; \
	  fi

install: install-check
	$(MAKE) build
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/crush
	install -Dm644 man/crush.1 $(DESTDIR)$(PREFIX)/share/man/man1/crush.1
	install -Dm644 completions/crush.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/crush
	install -Dm644 completions/_crush $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_crush
	install -Dm644 completions/crush.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/crush.fish

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/crush $(DESTDIR)$(PREFIX)/share/man/man1/crush.1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/crush \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_crush \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/crush.fish

# A fully static binary linked with musl: no NSS modules or other libraries loaded at run time,
# so it runs on Alpine, in empty containers and on any x86_64 Linux. Needs the Rust target
# (`rustup target add x86_64-unknown-linux-musl`) and musl-gcc for the bundled SQLite (Debian
# and Ubuntu: `apt-get install musl-tools`). SQLite's load-extension support is left out: it
# would need dlopen.
static:
	LIBSQLITE3_FLAGS="-DSQLITE_OMIT_LOAD_EXTENSION" \
	  $(CARGO) build --profile $(STATIC_PROFILE) --locked --target $(MUSL_TRIPLE)
	@file $(STATIC_BIN) 2>/dev/null || true
	@ls -l $(STATIC_BIN)

# One real `crush run` (a 2-step turn) with the static binary against the fake model server.
static-test: static
	CRUSH_STATIC_BIN=$(abspath $(STATIC_BIN)) $(CARGO) test --locked --test all -- --ignored static_binary

# The fallback when the musl target is not at hand: glibc with crt-static. Static glibc still
# loads NSS modules to resolve host names, so it needs a glibc system of the same version for
# that. --target must be explicit so proc-macros still build for the host.
static-glibc:
	LIBSQLITE3_FLAGS="-DSQLITE_OMIT_LOAD_EXTENSION" RUSTFLAGS="-C target-feature=+crt-static" \
	  $(CARGO) build --profile $(STATIC_PROFILE) --locked --target $(GLIBC_TRIPLE)
	@file $(TARGET_DIR)/$(GLIBC_TRIPLE)/$(STATIC_PROFILE)/crush 2>/dev/null || true
	@ls -l $(TARGET_DIR)/$(GLIBC_TRIPLE)/$(STATIC_PROFILE)/crush

clean:
	$(CARGO) clean
