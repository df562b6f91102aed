//! The `imp` binary's layout, which keeps an idle `imp proxy` small (see
//! crates/cli/build.rs): its relative relocations packed (`.relr.dyn`), and the
//! functions of `imp.order` together at the start of `.text`, in as little room as
//! their own sizes take. Read from the binary's ELF headers and symbol table, no
//! process run. Skips (saying why) where build.rs did not pass the options (another
//! linker, another target), and where too few of the listed names are in this
//! build's symbols (another profile than the one `scripts/imp-order` ran: the names
//! of inlined and generic functions differ).

use std::collections::HashSet;

const IMP: &str = env!("CARGO_BIN_EXE_imp");
const ORDER: &str = include_str!("../imp.order");

/// A section header: (name, type, address, file offset, size, link).
struct Section {
    name: String,
    kind: u32,
    addr: u64,
    offset: usize,
    size: usize,
    link: usize,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The NUL-terminated string at `at`.
fn c_str(b: &[u8], at: usize) -> String {
    let end = b[at..]
        .iter()
        .position(|&c| c == 0)
        .map_or(b.len(), |n| at + n);
    String::from_utf8_lossy(&b[at..end]).into_owned()
}

/// The section headers of a little-endian ELF64 file.
fn sections(elf: &[u8]) -> Vec<Section> {
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "imp is not a little-endian ELF64 file"
    );
    let shoff = usize::try_from(u64_at(elf, 0x28)).unwrap();
    let (entsize, count) = (
        usize::from(u16_at(elf, 0x3a)),
        usize::from(u16_at(elf, 0x3c)),
    );
    let header = |i: usize| &elf[shoff + i * entsize..shoff + (i + 1) * entsize];
    let names = header(usize::from(u16_at(elf, 0x3e)));
    let names_at = usize::try_from(u64_at(names, 24)).unwrap();
    (0..count)
        .map(|i| {
            let h = header(i);
            Section {
                name: c_str(elf, names_at + u32_at(h, 0) as usize),
                kind: u32_at(h, 4),
                addr: u64_at(h, 16),
                offset: usize::try_from(u64_at(h, 24)).unwrap(),
                size: usize::try_from(u64_at(h, 32)).unwrap(),
                link: u32_at(h, 40) as usize,
            }
        })
        .collect()
}

/// Every function symbol: (name, address, size).
fn functions(elf: &[u8], sections: &[Section]) -> Vec<(String, u64, u64)> {
    const SHT_SYMTAB: u32 = 2;
    const STT_FUNC: u8 = 2;
    let symtab = sections
        .iter()
        .find(|s| s.kind == SHT_SYMTAB)
        .expect("imp has a symbol table");
    let strtab = &sections[symtab.link];
    elf[symtab.offset..symtab.offset + symtab.size]
        .chunks_exact(24)
        .filter(|sym| sym[4] & 0xf == STT_FUNC && u64_at(sym, 8) != 0)
        .map(|sym| {
            let name = c_str(elf, strtab.offset + u32_at(sym, 0) as usize);
            (name, u64_at(sym, 8), u64_at(sym, 16))
        })
        .collect()
}

#[test]
fn relocations_packed_and_ordered_functions_together() {
    if option_env!("IMP_LINK_LAYOUT").is_none() {
        eprintln!("skipped: build.rs did not pass the layout options (not rustc's own lld)");
        return;
    }
    let elf = std::fs::read(IMP).expect("read the imp binary");
    let sections = sections(&elf);
    assert!(
        sections.iter().any(|s| s.name == ".relr.dyn"),
        "imp has no .relr.dyn: -z pack-relative-relocs did not reach the linker"
    );
    let text = sections
        .iter()
        .find(|s| s.name == ".text")
        .expect("imp has .text");
    let listed: HashSet<&str> = ORDER.lines().collect();
    let found: Vec<(String, u64, u64)> = functions(&elf, &sections)
        .into_iter()
        .filter(|(name, _, _)| listed.contains(name.as_str()))
        .collect();
    if found.len() * 4 < listed.len() {
        eprintln!(
            "skipped: {} of imp.order's {} functions are in this build (another profile \
             than scripts/imp-order's)",
            found.len(),
            listed.len()
        );
        return;
    }
    let start = found.iter().map(|f| f.1).min().unwrap();
    let end = found.iter().map(|f| f.1 + f.2).max().unwrap();
    // Each function aligned to at most 64 bytes, the padding between them.
    let room: u64 = found.iter().map(|f| f.2.next_multiple_of(64)).sum();
    assert!(
        start - text.addr < 4096,
        "the listed functions start {} bytes into .text",
        start - text.addr
    );
    assert!(
        end - start <= room + 4096,
        "the {} listed functions found spread over {} bytes; their sizes take {room}",
        found.len(),
        end - start
    );
}

/// The shared libraries imp needs (its `DT_NEEDED` entries).
fn needed(elf: &[u8], sections: &[Section]) -> Vec<String> {
    const DT_NULL: u64 = 0;
    const DT_NEEDED: u64 = 1;
    let dynamic = sections
        .iter()
        .find(|s| s.name == ".dynamic")
        .expect("imp is dynamically linked");
    let dynstr = &sections[dynamic.link];
    elf[dynamic.offset..dynamic.offset + dynamic.size]
        .chunks_exact(16)
        .map(|entry| (u64_at(entry, 0), u64_at(entry, 8)))
        .take_while(|&(tag, _)| tag != DT_NULL)
        .filter(|&(tag, _)| tag == DT_NEEDED)
        .map(|(_, at)| c_str(elf, dynstr.offset + usize::try_from(at).unwrap()))
        .collect()
}

/// imp takes `pow`, `log` and `log10` from libm only when one runs (src/libm.rs):
/// libm is not among the libraries loaded at every start, while libc is.
#[test]
fn libm_not_loaded_at_start() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        eprintln!("skipped: src/libm.rs is for Linux with glibc");
        return;
    }
    let elf = std::fs::read(IMP).expect("read the imp binary");
    let needed = needed(&elf, &sections(&elf));
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "imp's DT_NEEDED {needed:?} do not list libc: not read right"
    );
    assert!(
        !needed.iter().any(|n| n.starts_with("libm.so")),
        "imp needs libm at start: {needed:?}"
    );
}
