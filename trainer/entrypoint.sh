#!/bin/sh
# /usr/local/bin/lanenb-entrypoint in the trainer image (trainer/Dockerfile): how OpenShift-mode
# MPIJob pods start (lanenb/backends/kubernetes/restricted.py). Under OpenShift's restricted SCC
# (or Pod Security "restricted") the container runs as an arbitrary UID with GID 0 that has no
# /etc/passwd entry, and may not bind ports below 1024. OpenSSH needs a user name for the UID on
# both ends (ssh exits "No user exists for uid N"; sshd looks the login up by name and takes its
# home and shell from there), so this script first gives the UID one, then:
#
#   lanenb-entrypoint sshd PORT     a worker: host keys made now under $HOME/.sshd, sshd -D on PORT
#   lanenb-entrypoint CMD [ARG]...  anything else (the launcher's mpirun wrapper): exec CMD
#
# As root it changes nothing and runs the command. POSIX sh: no bash needed.
set -eu

user=${LANENB_USER:-mpiuser}
home=${HOME:-/home/$user}
uid=$(id -u)

if [ "$uid" != 0 ] && ! getent passwd "$uid" >/dev/null 2>&1; then
    # The Dockerfile makes /etc/passwd group-writable (g=u) and GID 0 is the group every
    # OpenShift UID gets, so the entry can be added here, in this container's own copy.
    if [ ! -w /etc/passwd ]; then
        echo "lanenb-entrypoint: uid $uid has no /etc/passwd entry and /etc/passwd is not writable;" \
             "ssh needs a user name: build the image from trainer/Dockerfile (chmod g=u /etc/passwd)" >&2
        exit 1
    fi
    printf '%s:x:%s:%s:lanenb:%s:/bin/sh\n' "$user" "$uid" "$(id -g)" "$home" >>/etc/passwd
fi
mkdir -p "$home"
export HOME="$home"

if [ "${1-}" = sshd ]; then
    port=${2:?usage: lanenb-entrypoint sshd PORT}
    keys="$home/.sshd"
    mkdir -p "$keys"
    chmod 700 "$keys"
    # Host keys per pod and start: the image's /etc/ssh keys are root's (0600), and nothing
    # checks them (ssh_config: StrictHostKeyChecking no, UserKnownHostsFile /dev/null).
    [ -f "$keys/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C '' -f "$keys/ssh_host_ed25519_key"
    # Without root sshd cannot switch users, read /etc/shadow or use PAM: pubkey logins as this
    # same UID only, authorized_keys from the operator's Secret at $HOME/.ssh (root-owned files in a
    # 0777 emptyDir: StrictModes would refuse them).
    exec /usr/sbin/sshd -D -e -p "$port" -h "$keys/ssh_host_ed25519_key" \
        -o UsePAM=no -o StrictModes=no -o PidFile=none -o "AuthorizedKeysFile=$home/.ssh/authorized_keys"
fi
exec "$@"
