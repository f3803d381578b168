//! A release binary against what its target needs to run on a user's machine.
//!
//! - Linux (musl): an ELF of the right machine, linked statically (no program interpreter, no
//!   shared library needed), so it runs on any distribution; a position-independent executable
//!   (`ET_DYN` with `DF_1_PIE` or a program interpreter), so that address-space layout
//!   randomisation moves its code and data too; with full RELRO (a `PT_GNU_RELRO` segment and
//!   binding at start-up), so that the GOT and other relocated data are read-only once loaded.
//! - macOS: a Mach-O of the right CPU whose `LC_BUILD_VERSION` says macOS with a minimum version
//!   no later than [`MACOS_MINIMUM`] (a later one and macOS refuses to start it). On arm64 a
//!   valid ad-hoc code signature is required (Apple silicon kills unsigned code): the code
//!   directory's page hashes are recomputed over the file and must all match, which also
//!   proves that stripping after linking did not invalidate it.
//! - Windows: a PE32+ console program for x86-64 that imports only DLLs every Windows has (no
//!   MinGW runtime DLL the user would not have).

use object::macho::{self, BuildVersionCommand, LinkeditDataCommand};
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
use object::read::macho::{MachHeader, MachOFile64};
use object::read::pe::PeFile64;
use object::{Endianness, FileKind, LittleEndian as LE, elf, pe};
use sha2::{Digest, Sha256};

/// The oldest macOS the release supports: 11.0 Big Sur, the first with Apple silicon.
pub const MACOS_MINIMUM: (u32, u32) = (11, 0);

/// The release targets and what each one's binary must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    LinuxAmd64,
    LinuxArm64,
    DarwinAmd64,
    DarwinArm64,
    WindowsAmd64,
}

impl Target {
    /// The Rust target triple this target is built for.
    pub fn from_triple(triple: &str) -> Option<Target> {
        Some(match triple {
            "x86_64-unknown-linux-musl" => Target::LinuxAmd64,
            "aarch64-unknown-linux-musl" => Target::LinuxArm64,
            "x86_64-apple-darwin" => Target::DarwinAmd64,
            "aarch64-apple-darwin" => Target::DarwinArm64,
            "x86_64-pc-windows-gnu" => Target::WindowsAmd64,
            _ => return None,
        })
    }
}

/// What was found, for the release log; `problems` is empty when the binary is fit to ship.
#[derive(Debug, Default)]
pub struct Report {
    pub facts: Vec<String>,
    pub problems: Vec<String>,
}

/// Checks `data`, the bytes of a binary built for `target`.
pub fn check(target: Target, data: &[u8]) -> Report {
    let mut r = Report::default();
    let kind = FileKind::parse(data);
    match (target, kind) {
        (Target::LinuxAmd64 | Target::LinuxArm64, Ok(FileKind::Elf64)) => {
            check_elf(target, data, &mut r)
        }
        (Target::DarwinAmd64 | Target::DarwinArm64, Ok(FileKind::MachO64)) => {
            check_macho(target, data, &mut r)
        }
        (Target::WindowsAmd64, Ok(FileKind::Pe64)) => check_pe(data, &mut r),
        (_, kind) => {
            let kind = match kind {
                Ok(k) => format!("{k:?}"),
                Err(e) => format!("unrecognised ({e})"),
            };
            r.problems
                .push(format!("not a binary for {target:?}: the file is {kind}"))
        }
    }
    r
}

fn check_elf(target: Target, data: &[u8], r: &mut Report) {
    let file = match ElfFile64::<Endianness>::parse(data) {
        Ok(f) => f,
        Err(e) => return r.problems.push(format!("unreadable ELF: {e}")),
    };
    let endian = file.endian();
    let machine = file.elf_header().e_machine(endian);
    let want = match target {
        Target::LinuxArm64 => elf::EM_AARCH64,
        _ => elf::EM_X86_64,
    };
    if machine == want {
        r.facts.push(format!("ELF for {target:?}"));
    } else {
        r.problems.push(format!(
            "ELF machine {machine}, expected {want} for {target:?}"
        ));
    }
    let mut interpreter = false;
    let mut relro = false;
    let mut dynamic = Dynamic::default();
    for ph in file.elf_program_headers() {
        match ph.p_type(endian) {
            elf::PT_INTERP => interpreter = true,
            elf::PT_GNU_RELRO => relro = true,
            elf::PT_DYNAMIC => {
                dynamic.present = true;
                match ph.dynamic(endian, data) {
                    Ok(Some(entries)) => dynamic.read(entries, endian),
                    Ok(None) => {}
                    Err(e) => r.problems.push(format!("unreadable dynamic segment: {e}")),
                }
            }
            _ => {}
        }
    }
    let needed = dynamic.needed;
    if interpreter || needed > 0 {
        r.problems.push(format!(
            "dynamically linked (program interpreter: {interpreter}, shared libraries needed: {needed}); a Linux release must be static"
        ));
    } else {
        r.facts
            .push("statically linked (no interpreter, no shared library)".into());
    }
    check_pie(file.elf_header().e_type(endian), interpreter, &dynamic, r);
    check_relro(relro, &dynamic, r);
}

/// What the checks need from an ELF file's dynamic segment.
#[derive(Debug, Default)]
struct Dynamic {
    /// Whether there is a `PT_DYNAMIC` segment at all.
    present: bool,
    /// `DT_NEEDED` entries: shared libraries the loader must find.
    needed: usize,
    /// A `DT_BIND_NOW` entry (the older spelling of `DF_BIND_NOW`).
    bind_now: bool,
    /// `DT_FLAGS` and `DT_FLAGS_1`, or 0 when absent.
    flags: u64,
    flags_1: u64,
}

impl Dynamic {
    fn read<D: Dyn>(&mut self, entries: &[D], endian: D::Endian) {
        for d in entries {
            let val: u64 = d.d_val(endian).into();
            match d.d_tag(endian).into() {
                elf::DT_NULL => break,
                elf::DT_NEEDED => self.needed += 1,
                elf::DT_BIND_NOW => self.bind_now = true,
                elf::DT_FLAGS => self.flags |= val,
                elf::DT_FLAGS_1 => self.flags_1 |= val,
                _ => {}
            }
        }
    }

    fn binds_now(&self) -> bool {
        self.bind_now
            || self.flags & u64::from(elf::DF_BIND_NOW) != 0
            || self.flags_1 & u64::from(elf::DF_1_NOW) != 0
    }
}

/// A position-independent executable is of type `ET_DYN` (loaded at an address the kernel
/// picks at random) and marked as a program rather than a shared library: a program
/// interpreter, or `DF_1_PIE` (the only mark a static-pie executable has).
fn check_pie(e_type: u16, interpreter: bool, dynamic: &Dynamic, r: &mut Report) {
    let pie_flag = dynamic.flags_1 & u64::from(elf::DF_1_PIE) != 0;
    match e_type {
        elf::ET_DYN if pie_flag || interpreter => r.facts.push(format!(
            "position-independent executable (ET_DYN, {})",
            if pie_flag {
                "DF_1_PIE"
            } else {
                "with a program interpreter"
            }
        )),
        elf::ET_DYN => r.problems.push(
            "not a position-independent executable: ELF type ET_DYN but neither a program interpreter nor DF_1_PIE in DT_FLAGS_1 (a shared library?)".into(),
        ),
        elf::ET_EXEC => r.problems.push(
            "not position-independent: ELF type ET_EXEC, loaded at a fixed address with no address-space randomisation (link with -pie, or -static-pie for a static build)".into(),
        ),
        other => r
            .problems
            .push(format!("not an executable: ELF type {other}")),
    }
}

/// Full RELRO: a `PT_GNU_RELRO` segment (the loader makes the relocated data in it, the GOT
/// included, read-only once it has applied the relocations) and binding at start-up
/// (`DF_BIND_NOW`, `DT_BIND_NOW` or `DF_1_NOW`), without which the lazily bound part of the
/// GOT stays writable.
fn check_relro(relro: bool, dynamic: &Dynamic, r: &mut Report) {
    match (relro, dynamic.binds_now()) {
        (true, true) => r
            .facts
            .push("full RELRO (PT_GNU_RELRO, BIND_NOW)".into()),
        (false, now) => r.problems.push(format!(
            "no RELRO: no PT_GNU_RELRO segment{}, so relocated data stays writable (link with -z relro -z now)",
            if now { "" } else { " and no BIND_NOW" }
        )),
        (true, false) if !dynamic.present => r.problems.push(
            "partial RELRO: a PT_GNU_RELRO segment but no dynamic segment, so no BIND_NOW (a static position-dependent link; link with -static-pie -z relro -z now)".into(),
        ),
        (true, false) => r.problems.push(
            "partial RELRO: a PT_GNU_RELRO segment but no BIND_NOW (no DT_BIND_NOW, no DF_BIND_NOW in DT_FLAGS, no DF_1_NOW in DT_FLAGS_1), so lazily bound GOT entries stay writable (link with -z now)".into(),
        ),
    }
}

fn check_macho(target: Target, data: &[u8], r: &mut Report) {
    let file = match MachOFile64::<Endianness>::parse(data) {
        Ok(f) => f,
        Err(e) => return r.problems.push(format!("unreadable Mach-O: {e}")),
    };
    let endian = file.endian();
    let cpu = file.macho_header().cputype(endian);
    let want = match target {
        Target::DarwinArm64 => macho::CPU_TYPE_ARM64,
        _ => macho::CPU_TYPE_X86_64,
    };
    if cpu == want {
        r.facts.push(format!("Mach-O for {target:?}"));
    } else {
        r.problems
            .push(format!("Mach-O CPU type {cpu:#x}, expected {want:#x}"));
    }
    let mut build_version = None;
    let mut signature = None;
    if let Ok(mut commands) = file.macho_load_commands() {
        while let Ok(Some(cmd)) = commands.next() {
            match cmd.cmd() {
                macho::LC_BUILD_VERSION => {
                    if let Ok(bv) = cmd.data::<BuildVersionCommand<Endianness>>() {
                        build_version = Some((bv.platform.get(endian), bv.minos.get(endian)));
                    }
                }
                macho::LC_CODE_SIGNATURE => {
                    if let Ok(cs) = cmd.data::<LinkeditDataCommand<Endianness>>() {
                        signature = Some((cs.dataoff.get(endian), cs.datasize.get(endian)));
                    }
                }
                _ => {}
            }
        }
    }
    match build_version {
        None => r
            .problems
            .push("no LC_BUILD_VERSION load command: the minimum macOS is unknown".into()),
        Some((platform, _)) if platform != macho::PLATFORM_MACOS => r
            .problems
            .push(format!("LC_BUILD_VERSION platform {platform}, not macOS")),
        Some((_, minos)) => {
            let (major, minor) = (minos >> 16, (minos >> 8) & 0xff);
            if (major, minor) > MACOS_MINIMUM {
                r.problems.push(format!(
                    "minimum macOS {major}.{minor}: it would refuse to run on macOS {}.{}–{major}.{minor} (set MACOSX_DEPLOYMENT_TARGET={}.{})",
                    MACOS_MINIMUM.0, MACOS_MINIMUM.1, MACOS_MINIMUM.0, MACOS_MINIMUM.1
                ));
            } else {
                r.facts.push(format!("minimum macOS {major}.{minor}"));
            }
        }
    }
    match (signature, target) {
        (Some((off, size)), _) => match verify_code_signature(data, off, size) {
            Ok(fact) => r.facts.push(fact),
            Err(e) => r.problems.push(format!("code signature: {e}")),
        },
        (None, Target::DarwinArm64) => r.problems.push(
            "no code signature: Apple silicon refuses to run unsigned code (keep the linker's ad-hoc signature)".into(),
        ),
        (None, _) => r.facts.push("not signed (allowed on x86_64)".into()),
    }
}

fn be32(data: &[u8], at: usize) -> Result<u32, String> {
    data.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| format!("truncated at byte {at}"))
}

const CSMAGIC_EMBEDDED_SIGNATURE: u32 = 0xfade_0cc0;
const CSMAGIC_CODEDIRECTORY: u32 = 0xfade_0c02;
const CS_HASHTYPE_SHA256: u8 = 2;
const CS_ADHOC: u32 = 0x2;

/// Verifies the embedded signature at `off..off+size`: a SuperBlob holding a CodeDirectory
/// whose SHA-256 page hashes match the file up to its code limit. Returns what it found.
pub fn verify_code_signature(data: &[u8], off: u32, size: u32) -> Result<String, String> {
    let (off, size) = (off as usize, size as usize);
    let blob = data
        .get(off..off + size)
        .ok_or("the signature lies outside the file")?;
    if be32(blob, 0)? != CSMAGIC_EMBEDDED_SIGNATURE {
        return Err("not an embedded signature SuperBlob".into());
    }
    let count = be32(blob, 8)? as usize;
    let mut cd = None;
    for i in 0..count {
        let blob_off = be32(blob, 12 + i * 8 + 4)? as usize;
        if be32(blob, blob_off)? == CSMAGIC_CODEDIRECTORY {
            cd = Some(blob_off);
            break;
        }
    }
    let cd = blob
        .get(cd.ok_or("no CodeDirectory")?..)
        .ok_or("truncated")?;
    let flags = be32(cd, 12)?;
    let hash_offset = be32(cd, 16)? as usize;
    let ident_offset = be32(cd, 20)? as usize;
    let n_code_slots = be32(cd, 28)? as usize;
    let code_limit = be32(cd, 32)? as usize;
    let (hash_size, hash_type, page_shift) = (
        *cd.get(36).ok_or("truncated")?,
        *cd.get(37).ok_or("truncated")?,
        *cd.get(39).ok_or("truncated")?,
    );
    if hash_type != CS_HASHTYPE_SHA256 || hash_size != 32 {
        return Err(format!(
            "hash type {hash_type} size {hash_size}, expected SHA-256"
        ));
    }
    if code_limit != off {
        return Err(format!(
            "the signature covers {code_limit} bytes but the code ends at {off}: the file changed after signing"
        ));
    }
    let page = 1usize << page_shift;
    if n_code_slots != code_limit.div_ceil(page) {
        return Err(format!(
            "{n_code_slots} page hashes for {code_limit} bytes of {page}-byte pages"
        ));
    }
    for slot in 0..n_code_slots {
        let start = slot * page;
        let end = (start + page).min(code_limit);
        let want = cd
            .get(hash_offset + slot * 32..hash_offset + slot * 32 + 32)
            .ok_or("truncated page hashes")?;
        if Sha256::digest(&data[start..end]).as_slice() != want {
            return Err(format!(
                "page {slot} (bytes {start}..{end}) does not match its hash: the file changed after signing"
            ));
        }
    }
    let ident = cd
        .get(ident_offset..)
        .and_then(|s| s.split(|b| *b == 0).next())
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let kind = if flags & CS_ADHOC != 0 {
        "ad-hoc"
    } else {
        "non-ad-hoc"
    };
    Ok(format!(
        "{kind} code signature valid: identifier {ident}, {n_code_slots} page hashes of {page} bytes match"
    ))
}

/// DLLs that every supported Windows has (the system's own and the API sets).
fn is_system_dll(name: &str) -> bool {
    const SYSTEM: &[&str] = &[
        "kernel32.dll",
        "ntdll.dll",
        "advapi32.dll",
        "bcrypt.dll",
        "bcryptprimitives.dll",
        "crypt32.dll",
        "ws2_32.dll",
        "userenv.dll",
        "user32.dll",
        "shell32.dll",
        "ole32.dll",
        "oleaut32.dll",
        "secur32.dll",
        "ncrypt.dll",
        "msvcrt.dll",
        "ucrtbase.dll",
        "iphlpapi.dll",
        "dbghelp.dll",
        "synchronization.dll",
    ];
    let lower = name.to_ascii_lowercase();
    SYSTEM.contains(&lower.as_str()) || lower.starts_with("api-ms-win-")
}

fn check_pe(data: &[u8], r: &mut Report) {
    let file = match PeFile64::parse(data) {
        Ok(f) => f,
        Err(e) => return r.problems.push(format!("unreadable PE: {e}")),
    };
    let nt = file.nt_headers();
    let machine = nt.file_header.machine.get(LE);
    if machine == pe::IMAGE_FILE_MACHINE_AMD64 {
        r.facts.push("PE32+ for WindowsAmd64".into());
    } else {
        r.problems
            .push(format!("PE machine {machine:#x}, expected x86-64"));
    }
    let subsystem = nt.optional_header.subsystem.get(LE);
    if subsystem != pe::IMAGE_SUBSYSTEM_WINDOWS_CUI {
        r.problems.push(format!(
            "subsystem {subsystem}, expected a console program (3)"
        ));
    }
    let mut dlls = Vec::new();
    match file.import_table() {
        Ok(Some(table)) => {
            if let Ok(mut descriptors) = table.descriptors() {
                while let Ok(Some(d)) = descriptors.next() {
                    if let Ok(name) = table.name(d.name.get(LE)) {
                        dlls.push(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
        }
        Ok(None) => {}
        Err(e) => r.problems.push(format!("unreadable import table: {e}")),
    }
    let foreign: Vec<&String> = dlls.iter().filter(|d| !is_system_dll(d)).collect();
    if foreign.is_empty() {
        r.facts
            .push(format!("imports only system DLLs: {}", dlls.join(", ")));
    } else {
        r.problems.push(format!(
            "imports DLLs a user may not have: {foreign:?} (link the MinGW runtime statically)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal signed region: `code` followed by a SuperBlob with one CodeDirectory.
    fn signed(code: &[u8], page_shift: u8) -> (Vec<u8>, u32, u32) {
        let page = 1usize << page_shift;
        let slots = code.len().div_ceil(page);
        let ident = b"kubectl-appupdate\0";
        let hash_offset = 44 + ident.len();
        let mut cd = Vec::new();
        for v in [
            CSMAGIC_CODEDIRECTORY,
            (hash_offset + slots * 32) as u32,
            0x20400,
            CS_ADHOC,
            hash_offset as u32,
            44,
            0,
            slots as u32,
            code.len() as u32,
        ] {
            cd.extend_from_slice(&v.to_be_bytes());
        }
        cd.extend_from_slice(&[32, CS_HASHTYPE_SHA256, 0, page_shift, 0, 0, 0, 0]);
        cd.extend_from_slice(ident);
        for chunk in code.chunks(page) {
            cd.extend_from_slice(&Sha256::digest(chunk));
        }
        let mut sb = Vec::new();
        for v in [CSMAGIC_EMBEDDED_SIGNATURE, (20 + cd.len()) as u32, 1, 0, 20] {
            sb.extend_from_slice(&v.to_be_bytes());
        }
        sb.extend_from_slice(&cd);
        let mut file = code.to_vec();
        file.extend_from_slice(&sb);
        (file, code.len() as u32, sb.len() as u32)
    }

    #[test]
    fn a_signature_whose_page_hashes_match_is_valid() {
        let code: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (file, off, size) = signed(&code, 12);
        let fact = verify_code_signature(&file, off, size).unwrap();
        assert!(fact.starts_with("ad-hoc code signature valid"), "{fact}");
        assert!(fact.contains("identifier kubectl-appupdate"), "{fact}");
        assert!(fact.contains("3 page hashes"), "{fact}");
    }

    #[test]
    fn a_byte_changed_after_signing_breaks_the_signature() {
        let code: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (mut file, off, size) = signed(&code, 12);
        file[5000] ^= 1;
        let err = verify_code_signature(&file, off, size).unwrap_err();
        assert!(err.contains("page 1 "), "{err}");
    }

    /// A minimal 64-bit little-endian Mach-O executable: the header and the given load
    /// commands (each `(cmd, payload)`), then `tail` bytes.
    fn macho(cputype: u32, commands: &[(u32, Vec<u32>)], tail: &[u8]) -> Vec<u8> {
        let sizeofcmds: usize = commands.iter().map(|(_, p)| 8 + 4 * p.len()).sum();
        let mut f = Vec::new();
        for v in [
            macho::MH_MAGIC_64,
            cputype,
            0,
            macho::MH_EXECUTE,
            commands.len() as u32,
            sizeofcmds as u32,
            0,
            0,
        ] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        for (cmd, payload) in commands {
            f.extend_from_slice(&cmd.to_le_bytes());
            f.extend_from_slice(&((8 + 4 * payload.len()) as u32).to_le_bytes());
            for v in payload {
                f.extend_from_slice(&v.to_le_bytes());
            }
        }
        f.extend_from_slice(tail);
        f
    }

    fn build_version(major: u32, minor: u32) -> (u32, Vec<u32>) {
        (
            macho::LC_BUILD_VERSION,
            vec![
                macho::PLATFORM_MACOS,
                (major << 16) | (minor << 8),
                15 << 16,
                0,
            ],
        )
    }

    #[test]
    fn the_minimum_macos_version_comes_from_lc_build_version_and_must_be_at_most_11() {
        let ok = check(
            Target::DarwinAmd64,
            &macho(macho::CPU_TYPE_X86_64, &[build_version(11, 0)], &[]),
        );
        assert_eq!(ok.problems, Vec::<String>::new());
        assert!(
            ok.facts.contains(&"minimum macOS 11.0".to_owned()),
            "{ok:?}"
        );

        let zig_default = check(
            Target::DarwinAmd64,
            &macho(macho::CPU_TYPE_X86_64, &[build_version(15, 0)], &[]),
        );
        assert_eq!(zig_default.problems.len(), 1, "{zig_default:?}");
        assert!(
            zig_default.problems[0].starts_with("minimum macOS 15.0")
                && zig_default.problems[0].contains("MACOSX_DEPLOYMENT_TARGET=11.0"),
            "{zig_default:?}"
        );

        let none = check(
            Target::DarwinAmd64,
            &macho(macho::CPU_TYPE_X86_64, &[], &[]),
        );
        assert!(
            none.problems[0].starts_with("no LC_BUILD_VERSION"),
            "{none:?}"
        );
    }

    #[test]
    fn an_arm64_mac_binary_needs_a_valid_signature_and_the_right_cpu() {
        let unsigned = check(
            Target::DarwinArm64,
            &macho(macho::CPU_TYPE_ARM64, &[build_version(11, 0)], &[]),
        );
        assert_eq!(unsigned.problems.len(), 1, "{unsigned:?}");
        assert!(unsigned.problems[0].starts_with("no code signature"));

        let intel = check(
            Target::DarwinArm64,
            &macho(macho::CPU_TYPE_X86_64, &[build_version(11, 0)], &[]),
        );
        assert!(
            intel
                .problems
                .iter()
                .any(|p| p.starts_with("Mach-O CPU type 0x1000007")),
            "{intel:?}"
        );

        // Signed over everything before the signature, header and load commands included.
        let header_len = 32 + 24 + 16;
        let code: Vec<u8> = macho(
            macho::CPU_TYPE_ARM64,
            &[build_version(11, 0), (macho::LC_CODE_SIGNATURE, vec![0, 0])],
            &vec![0xa5; 9000 - header_len],
        );
        let (_, off, size) = signed(&code, 12);
        let file = macho(
            macho::CPU_TYPE_ARM64,
            &[
                build_version(11, 0),
                (macho::LC_CODE_SIGNATURE, vec![off, size]),
            ],
            &vec![0xa5; 9000 - header_len],
        );
        let (signed_file, _, _) = signed(&file, 12);
        let r = check(Target::DarwinArm64, &signed_file);
        assert_eq!(r.problems, Vec::<String>::new(), "{r:?}");
        assert!(
            r.facts
                .iter()
                .any(|f| f.starts_with("ad-hoc code signature valid")),
            "{r:?}"
        );

        let mut tampered = signed_file.clone();
        tampered[100] ^= 0xff;
        let r = check(Target::DarwinArm64, &tampered);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("does not match its hash")),
            "{r:?}"
        );
    }

    #[test]
    fn a_file_that_is_no_binary_of_the_target_is_refused() {
        let r = check(Target::WindowsAmd64, b"#!/bin/sh\necho hi\n");
        assert_eq!(r.problems.len(), 1, "{r:?}");
        assert!(r.problems[0].starts_with("not a binary for WindowsAmd64"));
    }

    /// A directory of its own under the system's temporary directory, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("release-check-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Compiles a C program that does nothing with gcc and `flags`; `None` (after a note) when
    /// gcc is not installed.
    fn gcc(dir: &Scratch, name: &str, flags: &[&str]) -> Option<Vec<u8>> {
        let src = dir.0.join("main.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        let out = dir.0.join(name);
        let o = match std::process::Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
        {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("note: gcc is not installed; the ELF checks are not tested");
                return None;
            }
            Err(e) => panic!("gcc: {e}"),
        };
        assert!(
            o.status.success(),
            "gcc {flags:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Some(std::fs::read(out).unwrap())
    }

    fn has(lines: &[String], start: &str) -> bool {
        lines.iter().any(|l| l.starts_with(start))
    }

    /// The ELF tests build for the machine they run on; the checks are the same for both
    /// Linux targets, only the expected machine differs.
    fn host_linux() -> Option<Target> {
        match (std::env::consts::OS, std::env::consts::ARCH) {
            ("linux", "x86_64") => Some(Target::LinuxAmd64),
            ("linux", "aarch64") => Some(Target::LinuxArm64),
            _ => {
                eprintln!(
                    "note: not a Linux x86-64 or arm64 machine; the ELF checks are not tested"
                );
                None
            }
        }
    }

    #[test]
    fn a_static_pie_with_full_relro_passes_every_linux_check() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("static-pie");
        let Some(elf) = gcc(&dir, "static-pie", &["-static-pie", "-Wl,-z,relro,-z,now"]) else {
            return;
        };
        let r = check(target, &elf);
        assert_eq!(r.problems, Vec::<String>::new(), "{r:?}");
        assert!(
            r.facts
                .contains(&"position-independent executable (ET_DYN, DF_1_PIE)".to_owned()),
            "{r:?}"
        );
        assert!(
            r.facts
                .contains(&"full RELRO (PT_GNU_RELRO, BIND_NOW)".to_owned()),
            "{r:?}"
        );
    }

    #[test]
    fn a_dynamic_pie_with_full_relro_is_refused_only_for_its_linking() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("pie");
        let Some(elf) = gcc(&dir, "pie", &["-fPIE", "-pie", "-Wl,-z,relro,-z,now"]) else {
            return;
        };
        let r = check(target, &elf);
        assert_eq!(r.problems.len(), 1, "{r:?}");
        assert!(has(&r.problems, "dynamically linked"), "{r:?}");
        assert!(
            has(&r.facts, "position-independent executable (ET_DYN"),
            "{r:?}"
        );
        assert!(has(&r.facts, "full RELRO"), "{r:?}");
    }

    #[test]
    fn a_position_dependent_executable_is_refused() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("no-pie");
        let Some(dynamic) = gcc(&dir, "no-pie", &["-no-pie", "-Wl,-z,relro,-z,now"]) else {
            return;
        };
        let r = check(target, &dynamic);
        assert!(
            has(&r.problems, "not position-independent: ELF type ET_EXEC"),
            "{r:?}"
        );
        assert!(has(&r.facts, "full RELRO"), "{r:?}");

        // Static and position-dependent, as rustc links aarch64-unknown-linux-musl: no
        // dynamic segment at all, so no BIND_NOW either.
        let Some(fixed) = gcc(&dir, "static", &["-static", "-no-pie"]) else {
            return;
        };
        let r = check(target, &fixed);
        assert!(has(&r.facts, "statically linked"), "{r:?}");
        assert!(
            has(&r.problems, "not position-independent: ELF type ET_EXEC"),
            "{r:?}"
        );
        assert!(
            has(
                &r.problems,
                "partial RELRO: a PT_GNU_RELRO segment but no dynamic segment"
            ),
            "{r:?}"
        );
        assert_eq!(r.problems.len(), 2, "{r:?}");
    }

    #[test]
    fn relro_must_be_full() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("relro");
        let Some(none) = gcc(&dir, "norelro", &["-static-pie", "-Wl,-z,norelro,-z,now"]) else {
            return;
        };
        let r = check(target, &none);
        assert_eq!(
            r.problems,
            vec![
                "no RELRO: no PT_GNU_RELRO segment, so relocated data stays writable (link with -z relro -z now)"
                    .to_owned()
            ],
            "{r:?}"
        );

        let Some(partial) = gcc(&dir, "lazy", &["-static-pie", "-Wl,-z,relro,-z,lazy"]) else {
            return;
        };
        let r = check(target, &partial);
        assert_eq!(r.problems.len(), 1, "{r:?}");
        assert!(
            r.problems[0].starts_with("partial RELRO: a PT_GNU_RELRO segment but no BIND_NOW"),
            "{r:?}"
        );
    }

    #[test]
    fn a_shared_library_is_not_taken_for_a_position_independent_executable() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("shared");
        let Some(lib) = gcc(
            &dir,
            "lib.so",
            &["-shared", "-fPIC", "-nostdlib", "-Wl,-z,relro,-z,now"],
        ) else {
            return;
        };
        let r = check(target, &lib);
        assert!(
            has(
                &r.problems,
                "not a position-independent executable: ELF type ET_DYN"
            ),
            "{r:?}"
        );
    }

    /// Cut short or with its dynamic segment pointing outside the file, an ELF gives problem
    /// lines, never a panic.
    #[test]
    fn a_damaged_elf_gives_problems_not_a_panic() {
        let Some(target) = host_linux() else { return };
        let dir = Scratch::new("damaged");
        let Some(elf) = gcc(&dir, "static-pie", &["-static-pie", "-Wl,-z,relro,-z,now"]) else {
            return;
        };
        for len in (0..elf.len()).step_by(97).chain(0..256) {
            let r = check(target, &elf[..len]);
            assert!(!r.problems.is_empty(), "{len} bytes: {r:?}");
        }

        // Move the dynamic segment's offset past the end of the file.
        let file = ElfFile64::<Endianness>::parse(&*elf).unwrap();
        let endian = file.endian();
        let header = file.elf_header();
        let (phoff, phentsize) = (
            header.e_phoff(endian) as usize,
            header.e_phentsize(endian) as usize,
        );
        let index = file
            .elf_program_headers()
            .iter()
            .position(|ph| ph.p_type(endian) == elf::PT_DYNAMIC)
            .unwrap();
        let mut bad = elf.clone();
        let p_offset = phoff + index * phentsize + 8;
        bad[p_offset..p_offset + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let r = check(target, &bad);
        assert!(has(&r.problems, "unreadable dynamic segment"), "{r:?}");
        assert!(
            has(&r.problems, "not a position-independent executable"),
            "{r:?}"
        );
    }

    #[test]
    fn only_system_dlls_are_allowed_on_windows() {
        assert!(is_system_dll("KERNEL32.dll"));
        assert!(is_system_dll("api-ms-win-core-synch-l1-2-0.dll"));
        assert!(!is_system_dll("libwinpthread-1.dll"));
        assert!(!is_system_dll("libgcc_s_seh-1.dll"));
    }
}
