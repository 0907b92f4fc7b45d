//! Authentication and ACL rules: the digest scheme (SHA-1 + base64 of
//! "user:password"), ACL validation at create/setACL time, permission checks.

use crate::proto::{err, Acl};

/// An identity a connection proved (scheme, id), e.g. ("digest", "bob:hash").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthId {
    /// Scheme.
    pub scheme: String,
    /// Identity.
    pub id: String,
}

/// The digest identity for credentials "user:password".
pub fn digest_id(credentials: &str) -> Option<String> {
    let (user, _) = credentials.split_once(':')?;
    Some(format!("{user}:{}", base64(&sha1(credentials.as_bytes()))))
}

/// The identity a connection gets when it proves the superuser's digest: it passes every
/// ACL check, as ZooKeeper's `super` identity does.
pub fn superuser() -> AuthId {
    AuthId {
        scheme: "super".into(),
        id: String::new(),
    }
}

/// Whether the identities `ids` hold permission `perm` under `acl` (the superuser holds all).
pub fn allowed(acl: &[Acl], ids: &[AuthId], perm: i32) -> bool {
    ids.iter().any(|i| i.scheme == "super")
        || acl.iter().any(|a| {
            a.perms & perm != 0
                && ((a.scheme == "world" && a.id == "anyone")
                    || ids
                        .iter()
                        .any(|i| i.scheme == a.scheme && id_matches(&a.scheme, &i.id, &a.id)))
        })
}

fn id_matches(scheme: &str, have: &str, acl_id: &str) -> bool {
    match scheme {
        "ip" => ip_matches(have, acl_id),
        _ => have == acl_id,
    }
}

fn ip_matches(addr: &str, acl_id: &str) -> bool {
    let (net, bits) = match acl_id.split_once('/') {
        Some((n, b)) => (n, b.parse::<u32>().unwrap_or(33)),
        None => (acl_id, 32),
    };
    match (
        addr.parse::<std::net::Ipv4Addr>(),
        net.parse::<std::net::Ipv4Addr>(),
    ) {
        (Ok(a), Ok(n)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        _ => addr == acl_id,
    }
}

/// Checks a client-supplied ACL and expands the "auth" scheme into the
/// connection's identities, as ZooKeeper's fixupACL does. Err is InvalidACL.
pub fn fixup_acl(acl: &[Acl], ids: &[AuthId]) -> Result<Vec<Acl>, i32> {
    if acl.is_empty() {
        return Err(err::INVALID_ACL);
    }
    let mut out = Vec::with_capacity(acl.len());
    for a in acl {
        match a.scheme.as_str() {
            "world" if a.id == "anyone" => out.push(a.clone()),
            "auth" => {
                let before = out.len();
                for i in ids.iter().filter(|i| i.scheme != "ip") {
                    out.push(Acl {
                        perms: a.perms,
                        scheme: i.scheme.clone(),
                        id: i.id.clone(),
                    });
                }
                if out.len() == before {
                    return Err(err::INVALID_ACL);
                }
            }
            "digest" if a.id.contains(':') => out.push(a.clone()),
            "ip" if !a.id.is_empty() => out.push(a.clone()),
            _ => return Err(err::INVALID_ACL),
        }
    }
    out.dedup();
    Ok(out)
}

/// SHA-1 (FIPS 180-4) of `data`.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::perms;

    #[test]
    fn sha1_and_base64_match_known_vectors() {
        let hex: String = sha1(b"abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn digest_matches_zookeeper() {
        // Computed with ZooKeeper 3.8's DigestAuthenticationProvider main().
        assert_eq!(
            digest_id("super:superpw").unwrap(),
            "super:g9oN2HttPfn8MMWJZ2r45Np/LIA="
        );
        assert!(digest_id("nocolon").is_none());
    }

    #[test]
    fn acl_checks_and_fixup() {
        let bob = AuthId {
            scheme: "digest".into(),
            id: digest_id("bob:pw").unwrap(),
        };
        let acl = fixup_acl(
            &[Acl {
                perms: perms::READ,
                scheme: "auth".into(),
                id: String::new(),
            }],
            std::slice::from_ref(&bob),
        )
        .unwrap();
        assert_eq!(acl[0].id, bob.id);
        assert!(allowed(&acl, std::slice::from_ref(&bob), perms::READ));
        assert!(!allowed(&acl, &[bob], perms::WRITE));
        assert!(!allowed(&acl, &[], perms::READ));
        assert_eq!(
            fixup_acl(
                &[Acl {
                    perms: 31,
                    scheme: "auth".into(),
                    id: String::new()
                }],
                &[]
            ),
            Err(err::INVALID_ACL)
        );
        assert_eq!(fixup_acl(&[], &[]), Err(err::INVALID_ACL));
        assert_eq!(
            fixup_acl(
                &[Acl {
                    perms: 31,
                    scheme: "nope".into(),
                    id: "x".into()
                }],
                &[]
            ),
            Err(err::INVALID_ACL)
        );
        let ip = [Acl {
            perms: 31,
            scheme: "ip".into(),
            id: "127.0.0.0/8".into(),
        }];
        assert!(allowed(
            &ip,
            &[AuthId {
                scheme: "ip".into(),
                id: "127.0.0.1".into()
            }],
            perms::READ
        ));
        assert!(!allowed(
            &ip,
            &[AuthId {
                scheme: "ip".into(),
                id: "10.0.0.1".into()
            }],
            perms::READ
        ));
    }
}
