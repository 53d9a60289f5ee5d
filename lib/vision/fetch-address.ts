// Which destination addresses an image URL may reach. Loopback, private and public addresses are allowed;
// link-local ones (where cloud metadata services answer), the known metadata addresses outside link-local, and
// the unspecified address are not, unless allowLinkLocal. IPv4 rules also match the IPv4-mapped IPv6 form
// (::ffff:a.b.c.d, net.BlockList does that); the IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d)
// forms are listed explicitly.
import net from 'node:net';

interface Rule { kind: string; list: net.BlockList }

function blockList(v4: [string, number][], v6: [string, number][]): net.BlockList {
  const list = new net.BlockList();
  for (const [a, bits] of v4) list.addSubnet(a, bits, 'ipv4');
  for (const [a, bits] of v6) list.addSubnet(a, bits, 'ipv6');
  return list;
}

const RULES: Rule[] = [
  {
    kind: 'a cloud metadata address',
    list: blockList([['169.254.169.254', 32], ['100.100.100.200', 32]], [
      ['fd00:ec2::254', 128],
      ['::a9fe:a9fe', 128], ['64:ff9b::a9fe:a9fe', 128], // 169.254.169.254
      ['::6464:64c8', 128], ['64:ff9b::6464:64c8', 128], // 100.100.100.200
    ]),
  },
  {
    kind: 'a link-local address',
    list: blockList([['169.254.0.0', 16]], [['fe80::', 10], ['::a9fe:0', 112], ['64:ff9b::a9fe:0', 112]]),
  },
  {
    kind: 'the unspecified address',
    list: blockList([['0.0.0.0', 8]], [['::', 128], ['64:ff9b::', 104]]),
  },
];

/** Why an address may not be reached ('a link-local address', ...), or null when it may. */
export function forbiddenAddressKind(address: string): string | null {
  const family = net.isIP(address);
  if (family === 0) return 'not an IP address';
  try {
    for (const rule of RULES) {
      if (rule.list.check(address, family === 4 ? 'ipv4' : 'ipv6')) return rule.kind;
    }
  } catch {
    return 'an address that could not be checked';
  }
  return null;
}
