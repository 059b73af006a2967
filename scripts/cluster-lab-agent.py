#!/usr/bin/python3
# cluster-lab-agent.py - the remote-exec pair of scripts/cluster-lab.
#
#   cluster-lab-agent.py relay LABDIR
#       the lab's "sshd": listens on LABDIR/relay.sock in the root
#       namespaces and runs each request inside the named host with
#       nsenter (net, uts, ipc, pid, mount of the host's holder), the
#       caller's stdin, stdout and stderr passed over the socket; replies
#       with the exit status.  It has to live outside the hosts: a process
#       inside h1 cannot enter h2's PID namespace (not a descendant).
#   cluster-lab-agent.py rsh LABDIR [SSH-OPTIONS] HOST COMMAND...
#       ssh-compatible client (Open MPI's plm_rsh_agent, hydra's
#       -launcher ssh -launcher-exec): ssh options are skipped, HOST is a
#       lab name or address (user@ ignored), the COMMAND words are joined
#       with spaces and run by /bin/sh -c in an environment like a
#       non-interactive ssh session (HOME, PATH, USER, LOGNAME, SHELL,
#       LANG), in the caller's directory when the host has it, else /.
#   cluster-lab-agent.py exec LABDIR HOST ARGV...
#       ARGV as is, with the caller's whole environment.
# Exit status: the remote command's; 255 when the host is unknown or down
# (as ssh).  When the host crashes under a running command, rsh and exec
# go silent as ssh does: they wait, the remote's stdout and stderr still
# open, until killed; with ssh's -o ServerAliveInterval=S (and
# ServerAliveCountMax=N, 3) rsh gives up after S*N seconds with 255.
# CLUSTER_LAB_AGENT_LOG=FILE appends each rsh argv to FILE.
import array
import json
import os
import select
import signal
import socket
import struct
import sys

NSENTER = '/usr/bin/nsenter'


def holder(lab, host):
    """Root-namespace pid of HOST's holder, or None when it is gone."""
    try:
        with open(os.path.join(lab, 'hosts', host + '.pid')) as f:
            pid, start = f.read().split()[:2]
        with open('/proc/%s/stat' % pid) as f:
            st = f.read()
        f = st[st.rindex(')') + 2:].split()
        if f[19] != start or f[0] in ('Z', 'X'):
            return None
        return int(pid)
    except (OSError, ValueError, IndexError):
        return None


def serve(lab, conn):
    fds = array.array('i')
    msg, anc, _, _ = conn.recvmsg(1 << 16, socket.CMSG_LEN(3 * fds.itemsize))
    for level, typ, d in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(d[:len(d) - len(d) % fds.itemsize])
    if len(msg) < 4:
        return
    n = struct.unpack('!I', msg[:4])[0]
    data = msg[4:]
    while len(data) < n:
        b = conn.recv(1 << 16)
        if not b:
            return
        data += b
    req = json.loads(data[:n].decode())
    pid = holder(lab, req['host'])
    if pid is None or len(fds) != 3:
        os.write(fds[2] if len(fds) == 3 else 2,
                 ('cluster-lab agent: host %s is down\n' % req['host']).encode())
        conn.sendall(b'rc 255\n')
        return
    cwd = req.get('cwd') or '/'
    if not os.path.isdir('/proc/%d/root%s' % (pid, cwd)):
        cwd = '/'
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            for i in range(3):
                os.dup2(fds[i], i)
            os.closerange(3, 1 << 16)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execve(NSENTER, [NSENTER, '-t', str(pid), '-n', '-u', '-i', '-p',
                                '-m', '--wd=' + cwd, '--'] + req['argv'],
                      req['env'])
        finally:
            os._exit(127)
    for fd in fds:
        os.close(fd)
    watch = [conn]
    buf = b''
    while True:
        r, _, _ = select.select(watch, [], [], 0.2)
        if r:
            b = conn.recv(4096)
            if not b:
                # The client is gone (killed): hang up on the remote.
                watch = []
                try:
                    os.killpg(child, signal.SIGHUP)
                except OSError:
                    pass
            buf += b
            while b'\n' in buf:
                line, buf = buf.split(b'\n', 1)
                if line.startswith(b'sig '):
                    try:
                        os.killpg(child, int(line[4:]))
                    except (OSError, ValueError):
                        pass
        wpid, st = os.waitpid(child, os.WNOHANG)
        if wpid:
            break
    rc = os.waitstatus_to_exitcode(st)
    if rc < 0:
        rc = 255 if -rc == signal.SIGKILL else 128 - rc
    # The host crashed under the command: no status ever comes back.
    msg = b'lost\n' if holder(lab, req['host']) != pid else b'rc %d\n' % rc
    try:
        conn.sendall(msg)
    except OSError:
        pass


def relay(lab):
    path = os.path.join(lab, 'relay.sock')
    try:
        os.unlink(path)
    except OSError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o600)
    s.listen(128)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # reap the servers
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    while True:
        conn, _ = s.accept()
        if os.fork() == 0:
            s.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                serve(lab, conn)
            finally:
                os._exit(0)
        conn.close()


def known_hosts(lab):
    names = {}
    try:
        with open(os.path.join(lab, 'hosts.list')) as f:
            for line in f:
                w = line.split()
                if len(w) >= 2:
                    names[w[0]] = w[0]
                    names[w[1]] = w[0]
    except OSError:
        pass
    return names


def client(lab, host, argv, env, lost_after=None):
    name = known_hosts(lab).get(host.split('@')[-1])
    if name is None:
        sys.stderr.write('ssh: Could not resolve hostname %s (cluster-lab)\n' % host)
        return 255
    req = json.dumps({'host': name, 'argv': argv, 'cwd': os.getcwd(),
                      'env': env}).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.path.join(lab, 'relay.sock'))
    except OSError as e:
        sys.stderr.write('cluster-lab agent: no relay in %s (%s); is the lab up?\n'
                         % (lab, e))
        return 255
    s.sendmsg([struct.pack('!I', len(req)) + req],
              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [0, 1, 2]))])

    def forward(sig, _frame):
        try:
            s.sendall(b'sig %d\n' % sig)
        except OSError:
            pass
        os._exit(128 + sig)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    buf = b''
    while True:
        b = s.recv(4096)
        if not b:
            return 255
        buf += b
        if buf == b'lost\n':
            # As ssh when its server vanishes: silence until the keepalives
            # give up (never without ServerAliveInterval).
            while lost_after is None:
                signal.pause()
            if lost_after > 0:
                import time
                time.sleep(lost_after)
            sys.stderr.write('Timeout, server %s not responding.\n' % host)
            return 255
        if buf.endswith(b'\n') and buf.startswith(b'rc '):
            return int(buf[3:])


# ssh's options without and with an argument.
NOARG = set('1246AaCfGgKkMNnqsTtVvXxYy')
WITHARG = set('BbcDEeFIiJLlmOopQRSWw')


def rsh(lab, args):
    log = os.environ.get('CLUSTER_LAB_AGENT_LOG')
    if log:
        with open(log, 'a') as f:
            f.write(json.dumps(args) + '\n')
    i = 0
    opts = {}
    while i < len(args) and args[i].startswith('-') and len(args[i]) > 1:
        a = args[i]
        i += 1
        if a == '--':
            break
        for j in range(1, len(a)):
            if a[j] in WITHARG:
                val = a[j + 1:]
                if not val and i < len(args):
                    val = args[i]
                    i += 1
                if a[j] == 'o' and '=' in val:
                    k, v = val.split('=', 1)
                    opts[k.strip().lower()] = v.strip()
                break
    # ssh -o ServerAliveInterval=S [-o ServerAliveCountMax=N (3)]: a
    # crashed host is reported after S*N seconds; without it, never.
    lost_after = None
    try:
        if int(opts.get('serveraliveinterval', '0')) > 0:
            lost_after = (int(opts['serveraliveinterval']) *
                          int(opts.get('serveralivecountmax', '3')))
    except ValueError:
        pass
    if i + 1 >= len(args):
        sys.stderr.write('usage: lab-rsh [ssh options] HOST COMMAND... '
                         '(no login shells)\n')
        return 255
    host, words = args[i], args[i + 1:]
    env = {'HOME': '/root', 'USER': 'root', 'LOGNAME': 'root', 'SHELL': '/bin/sh',
           'PATH': os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin'),
           'LANG': os.environ.get('LANG', 'C.UTF-8')}
    return client(lab, host, ['/bin/sh', '-c', ' '.join(words)], env, lost_after)


def main():
    if len(sys.argv) < 3:
        sys.stderr.write('usage: cluster-lab-agent.py relay|rsh|exec LABDIR ...\n')
        return 2
    mode, lab, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == 'relay':
        relay(lab)
    elif mode == 'rsh':
        return rsh(lab, rest)
    elif mode == 'exec' and len(rest) >= 2:
        return client(lab, rest[0], rest[1:], dict(os.environ))
    sys.stderr.write('cluster-lab-agent.py: bad arguments\n')
    return 2


if __name__ == '__main__':
    sys.exit(main())
