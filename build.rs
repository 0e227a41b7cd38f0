//! Builds the SPDK binding when the `spdk` feature is on; does nothing
//! otherwise, so a default build needs neither SPDK nor a C compiler.

fn main() {
    #[cfg(feature = "spdk")]
    spdk::build();
}

#[cfg(feature = "spdk")]
mod spdk {
    use std::process::Command;

    const HELP: &str = "the `spdk` feature needs SPDK (v24.01 or later) installed with its \
        pkg-config files (spdk_nvme.pc, spdk_env_dpdk.pc, spdk_syslibs.pc), e.g. built from \
        source with `./configure --with-shared && make && make install`, plus pkg-config and a \
        C compiler; set PKG_CONFIG_PATH if the .pc files are not under /usr/local/lib/pkgconfig \
        (see spdk-env/README.md)";

    /// `pkg-config ARGS`, split into words, or a build failure saying what
    /// to install.
    fn pkg_config(args: &[&str]) -> Vec<String> {
        println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
        let out = Command::new("pkg-config").args(args).output();
        let out = match out {
            Ok(out) if out.status.success() => out,
            Ok(out) => panic!(
                "`pkg-config {}` failed: {}; {HELP}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!("cannot run pkg-config: {e}; {HELP}"),
        };
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    pub fn build() {
        println!("cargo:rerun-if-changed=src/device/spdk/shim.c");
        let cflags = pkg_config(&["--cflags", "spdk_nvme", "spdk_env_dpdk"]);
        let mut libs = pkg_config(&["--libs", "spdk_nvme", "spdk_env_dpdk"]);
        libs.extend(pkg_config(&["--libs", "--static", "spdk_syslibs"]));

        let mut cc = cc::Build::new();
        cc.file("src/device/spdk/shim.c").warnings(true);
        for flag in &cflags {
            cc.flag(flag);
        }
        cc.compile("stria_spdk_shim");

        // Every SPDK and DPDK library goes on the link line with
        // `--as-needed` off. Debian's gcc and rustc link with `--as-needed`,
        // which drops (1) libspdk_sock_posix, which registers itself from a
        // constructor and has no symbol anyone references, so every TCP
        // connect fails with "Cannot find any sock implementation", and (2)
        // the DPDK libraries, since libspdk_env_dpdk.so carries no NEEDED
        // entry for them ("undefined symbol: per_lcore__rte_errno" at
        // start). Link arguments come after the shim's archive, which
        // references them, so the order is right.
        println!("cargo:rustc-link-arg=-Wl,--push-state,--no-as-needed");
        for lib in &libs {
            if let Some(dir) = lib.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            }
            println!("cargo:rustc-link-arg={lib}");
        }
        println!("cargo:rustc-link-arg=-lspdk_sock_posix");
        println!("cargo:rustc-link-arg=-Wl,--pop-state");
    }
}
