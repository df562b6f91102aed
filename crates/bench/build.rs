//! Whether this `imp-bench` was built with a profile (`scripts/pgo`), for its reports:
//! `-Cprofile-use` in the encoded flags sets `IMP_BENCH_BUILD` to `profile-guided`.

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let guided = flags.split('\x1f').any(|f| f.contains("profile-use"));
    let build = if guided { "profile-guided" } else { "plain" };
    println!("cargo:rustc-env=IMP_BENCH_BUILD={build}");
}
