# crush — build, test, benchmark, install.
PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
BIN := $(TARGET_DIR)/release/crush
TARGET_TRIPLE ?= x86_64-unknown-linux-gnu

.PHONY: all build test bench lint install uninstall static docs clean

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

install: build
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

# A fully static binary (glibc, crt-static). --target must be explicit so proc-macros still
# build for the host. SQLite's load-extension support is left out: it would need dlopen.
static:
	LIBSQLITE3_FLAGS="-DSQLITE_OMIT_LOAD_EXTENSION" RUSTFLAGS="-C target-feature=+crt-static" \
	  $(CARGO) build --release --locked --target $(TARGET_TRIPLE)
	@file $(TARGET_DIR)/$(TARGET_TRIPLE)/release/crush 2>/dev/null || true
	@ls -l $(TARGET_DIR)/$(TARGET_TRIPLE)/release/crush

clean:
	$(CARGO) clean
