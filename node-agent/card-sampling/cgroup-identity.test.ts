import { describe, expect, it } from 'vitest';
import { parseCgroupPath, parseProcCgroup } from './cgroup-identity.js';

const UID = '7f3c2a1e-5b4d-4c3b-9a8f-0e1d2c3b4a59';
const CID = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';

describe('parseProcCgroup', () => {
  it.each([
    [
      'cgroup v2, systemd driver, containerd',
      `0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${UID.replace(/-/g, '_')}.slice/cri-containerd-${CID}.scope\n`,
    ],
    [
      'cgroup v2, systemd driver, guaranteed QoS, CRI-O',
      `0::/kubepods.slice/kubepods-pod${UID.replace(/-/g, '_')}.slice/crio-${CID}.scope\n`,
    ],
    ['cgroup v2, cgroupfs driver', `0::/kubepods/besteffort/pod${UID}/${CID}\n`],
    [
      'cgroup v1, cgroupfs driver, docker',
      [
        '12:pids:/kubepods/burstable/pod' + UID + '/' + CID,
        '11:cpu,cpuacct:/kubepods/burstable/pod' + UID + '/' + CID,
        '1:name=systemd:/kubepods/burstable/pod' + UID + '/' + CID,
        '',
      ].join('\n'),
    ],
    [
      'cgroup v1, systemd driver, docker',
      `4:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID.replace(/-/g, '_')}.slice/docker-${CID}.scope\n`,
    ],
    ['hybrid: empty v2 line, v1 lines name the container', `0::/\n5:devices:/kubepods/pod${UID}/${CID}\n`],
  ])('%s', (_name, text) => {
    expect(parseProcCgroup(text)).toEqual({ podUid: UID, containerId: CID });
  });

  it.each([
    ['a host process', '0::/system.slice/sshd.service\n'],
    ['the pod sandbox level only', `0::/kubepods/burstable/pod${UID}\n`],
    ['an init scope', '0::/init.scope\n'],
    ['empty file', ''],
    ['a short container id', `0::/kubepods/pod${UID}/abc123\n`],
  ])('%s is no container', (_name, text) => {
    expect(parseProcCgroup(text)).toBeNull();
  });

  it('upper-case and underscored UIDs come back in canonical form', () => {
    const path = `/kubepods.slice/kubepods-pod${UID.toUpperCase().replace(/-/g, '_')}.slice/cri-containerd-${CID}.scope`;
    expect(parseCgroupPath(path)?.podUid).toBe(UID);
  });
});
