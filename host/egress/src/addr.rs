//! Which addresses are public destinations. Everything in the IANA IPv4 and IPv6
//! special-purpose address registries that is not globally reachable is refused, and so is
//! every IPv6 address outside global unicast (2000::/3). Forms that embed an IPv4 address
//! (IPv4-mapped, NAT64's well-known prefix, 6to4) are judged by the address they embed.
//!
//! A few registry entries that IANA marks globally reachable are refused anyway, because
//! they sit inside a block that is not (192.0.0.0/24's anycast addresses, 2001::/23's).

use ipnet::{Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

#[allow(clippy::too_many_arguments)]
const fn v6(s: [u16; 8], len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

/// IPv4 blocks that are not public destinations, each with the registry's name for it. The
/// order matters only for the name given (the narrower entry first).
pub const V4_NON_GLOBAL: &[(Ipv4Net, &str)] = &[
    (v4(0, 0, 0, 0, 8), "\"this network\" (0.0.0.0/8)"),
    (v4(10, 0, 0, 0, 8), "private-use (10.0.0.0/8)"),
    (
        v4(100, 64, 0, 0, 10),
        "shared address space (100.64.0.0/10)",
    ),
    (v4(127, 0, 0, 0, 8), "loopback (127.0.0.0/8)"),
    (v4(169, 254, 0, 0, 16), "link-local (169.254.0.0/16)"),
    (v4(172, 16, 0, 0, 12), "private-use (172.16.0.0/12)"),
    (
        v4(192, 0, 0, 0, 24),
        "IETF protocol assignments (192.0.0.0/24)",
    ),
    (v4(192, 0, 2, 0, 24), "documentation (192.0.2.0/24)"),
    (
        v4(192, 88, 99, 0, 24),
        "6to4 relay anycast (192.88.99.0/24)",
    ),
    (v4(192, 168, 0, 0, 16), "private-use (192.168.0.0/16)"),
    (v4(198, 18, 0, 0, 15), "benchmarking (198.18.0.0/15)"),
    (v4(198, 51, 100, 0, 24), "documentation (198.51.100.0/24)"),
    (v4(203, 0, 113, 0, 24), "documentation (203.0.113.0/24)"),
    (v4(224, 0, 0, 0, 4), "multicast (224.0.0.0/4)"),
    (
        v4(255, 255, 255, 255, 32),
        "limited broadcast (255.255.255.255)",
    ),
    (v4(240, 0, 0, 0, 4), "reserved (240.0.0.0/4)"),
];

/// IPv6 blocks that are not public destinations (checked before the embedded-IPv4 forms and
/// the global-unicast rule).
pub const V6_NON_GLOBAL: &[(Ipv6Net, &str)] = &[
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "unspecified (::)"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "loopback (::1)"),
    (
        v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        "IPv4-compatible (::a.b.c.d, deprecated)",
    ),
    (
        v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "local-use NAT64 (64:ff9b:1::/48)",
    ),
    (
        v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64),
        "discard-only (100::/64)",
    ),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),
        "Teredo (2001::/32, embeds an IPv4 address)",
    ),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF protocol assignments (2001::/23)",
    ),
    (
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        "documentation (2001:db8::/32)",
    ),
    (
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        "documentation (3fff::/20)",
    ),
    (
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        "segment routing SIDs (5f00::/16)",
    ),
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        "unique-local (fc00::/7)",
    ),
    (
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        "link-local (fe80::/10)",
    ),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "site-local (fec0::/10, deprecated)",
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast (ff00::/8)"),
];

/// NAT64's well-known prefix: the last 32 bits are the IPv4 destination.
pub const NAT64: Ipv6Net = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
/// 6to4: bits 16..48 are the IPv4 address of the site's relay.
pub const SIX_TO_FOUR: Ipv6Net = v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);
/// IPv4-mapped addresses (`::ffff:a.b.c.d`): an IPv6 socket connecting to one reaches the
/// IPv4 address.
pub const V4_MAPPED: Ipv6Net = v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96);
/// IPv6 global unicast: everything outside it is special-purpose or unallocated.
pub const GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// Why `ip` is not a public destination (the registry's name of its block), or `None` when it
/// is one.
pub fn non_global(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => non_global_v4(ip),
        IpAddr::V6(ip) => non_global_v6(ip),
    }
}

fn non_global_v4(ip: Ipv4Addr) -> Option<&'static str> {
    V4_NON_GLOBAL
        .iter()
        .find(|(net, _)| net.contains(&ip))
        .map(|(_, why)| *why)
}

fn non_global_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if V4_MAPPED.contains(&ip) {
        return non_global_v4(embedded_low(ip));
    }
    if let Some((_, why)) = V6_NON_GLOBAL.iter().find(|(net, _)| net.contains(&ip)) {
        return Some(why);
    }
    if NAT64.contains(&ip) {
        return non_global_v4(embedded_low(ip));
    }
    if SIX_TO_FOUR.contains(&ip) {
        let s = ip.segments();
        let v4 = Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2]));
        return non_global_v4(v4);
    }
    if !GLOBAL_UNICAST.contains(&ip) {
        return Some("outside IPv6 global unicast (2000::/3)");
    }
    None
}

/// The IPv4 address in the last 32 bits.
fn embedded_low(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> bool {
        non_global(ip.parse().unwrap()).is_some()
    }

    fn v4_next(ip: Ipv4Addr, d: i64) -> Option<Ipv4Addr> {
        u32::try_from(i64::from(u32::from(ip)) + d)
            .ok()
            .map(Ipv4Addr::from)
    }

    fn v6_next(ip: Ipv6Addr, d: i128) -> Option<Ipv6Addr> {
        let n = u128::from(ip) as i128;
        n.checked_add(d)
            .filter(|n| *n >= 0)
            .map(|n| Ipv6Addr::from(n as u128))
    }

    /// Every IPv4 block: its first, a middle and its last address are refused; the addresses
    /// just outside it are refused only when another block holds them.
    #[test]
    fn every_ipv4_block_inside_edges_and_just_outside() {
        let in_any = |ip: Ipv4Addr| V4_NON_GLOBAL.iter().any(|(n, _)| n.contains(&ip));
        for (net, why) in V4_NON_GLOBAL {
            let first = net.network();
            let last = net.broadcast();
            let mid = Ipv4Addr::from(u32::from(first) / 2 + u32::from(last) / 2);
            for ip in [first, mid, last] {
                assert!(non_global(ip.into()).is_some(), "{ip} in {why}");
            }
            for ip in [v4_next(first, -1), v4_next(last, 1)].into_iter().flatten() {
                assert_eq!(
                    non_global(ip.into()).is_some(),
                    in_any(ip),
                    "{ip} next to {why}"
                );
            }
        }
        // The neighbours that are public, by name.
        for ip in [
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.88.100.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
            "1.1.1.1",
            "8.8.8.8",
        ] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn every_ipv6_block_inside_edges_and_just_outside() {
        for (net, why) in V6_NON_GLOBAL {
            let first = net.network();
            let last = net.broadcast();
            let mid = Ipv6Addr::from(u128::from(first) / 2 + u128::from(last) / 2);
            for ip in [first, mid, last] {
                assert!(non_global(ip.into()).is_some(), "{ip} in {why}");
            }
        }
        // Just outside the blocks (what is not global unicast stays refused).
        for (ip, public) in [
            ("::1:0:0", false), // after ::/96: outside 2000::/3
            ("64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("64:ff9b:2::", false),
            ("100::1:0:0:0:0", false),
            ("2000::", true),
            ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("2001:200::", true),
            ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("2001:db9::", true),
            ("2003::", true),
            ("2001:4860:4860::8888", true),
            ("2606:4700:4700::1111", true),
            ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("3fff:1000::", true), // just past 3fff::/20, still in 2000::/3
            ("4000::", false),
            ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("fe00::", false),
            ("fec0::", false),
            ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
        ] {
            assert_eq!(!refused(ip), public, "{ip}");
        }
        // The global unicast block's own edges.
        let g = GLOBAL_UNICAST;
        assert!(refused(&v6_next(g.network(), -1).unwrap().to_string()));
        assert!(!refused(&g.network().to_string()));
        assert!(!refused(&g.broadcast().to_string()));
        assert!(refused(&v6_next(g.broadcast(), 1).unwrap().to_string()));
    }

    /// IPv4-mapped, NAT64 and 6to4 addresses are judged by the IPv4 address they carry;
    /// Teredo and IPv4-compatible ones are refused whatever they carry.
    #[test]
    fn embedded_ipv4_forms() {
        for (ip, public) in [
            ("::ffff:127.0.0.1", false),
            ("::ffff:169.254.169.254", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("::ffff:0:0", false),
            ("::ffff:255.255.255.255", false),
            ("64:ff9b::127.0.0.1", false),
            ("64:ff9b::169.254.169.254", false),
            ("64:ff9b::192.168.1.1", false),
            ("64:ff9b::8.8.8.8", true),
            ("64:ff9b:1::8.8.8.8", false),
            ("2002:7f00:1::", false),                           // 127.0.0.1
            ("2002:a9fe:a9fe::1", false),                       // 169.254.169.254
            ("2002:c0a8:101::1", false),                        // 192.168.1.1
            ("2002:0a00:0001::1", false),                       // 10.0.0.1
            ("2002:0808:0808::1", true),                        // 8.8.8.8
            ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false), // 255.255.255.255
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", false),    // Teredo
            ("::127.0.0.1", false),
            ("::8.8.8.8", false),
            ("::", false),
            ("::1", false),
        ] {
            assert_eq!(!refused(ip), public, "{ip}");
        }
    }

    #[test]
    fn reasons_name_the_block() {
        assert_eq!(
            non_global("169.254.169.254".parse().unwrap()),
            Some("link-local (169.254.0.0/16)")
        );
        assert_eq!(
            non_global("255.255.255.255".parse().unwrap()),
            Some("limited broadcast (255.255.255.255)")
        );
        assert_eq!(
            non_global("2001::1".parse().unwrap()),
            Some("Teredo (2001::/32, embeds an IPv4 address)")
        );
        assert_eq!(
            non_global("::ffff:127.0.0.1".parse().unwrap()),
            Some("loopback (127.0.0.0/8)")
        );
    }
}
