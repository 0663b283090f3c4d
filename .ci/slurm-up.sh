#!/bin/bash
# Starts a single-node Slurm cluster on this machine (as root) for the executor tests:
# munge with a random key, slurmctld and slurmd, one partition `debug` with this host.
# Idempotent; exits 0 once the node is idle. docs/scale-out.md explains each setting.
set -e
H=$(hostname -s); C=$(nproc); M=$(( $(free -m | awk '/Mem/{print $2}') - 1024 ))
mkdir -p /etc/munge /var/log/munge /var/lib/munge /run/munge /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
[ -f /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chmod 400 /etc/munge/munge.key; chown -R root:root /etc/munge /var/log/munge /var/lib/munge /run/munge
pgrep munged >/dev/null || munged --force
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=hevo
SlurmctldHost=$H
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.txt
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
NodeName=$H CPUs=$C RealMemory=$M State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
pgrep slurmctld >/dev/null || slurmctld
pgrep slurmd >/dev/null || slurmd
for i in $(seq 50); do sinfo -h -o %T 2>/dev/null | grep -q idle && exit 0; sleep 0.2; done
sinfo; exit 1
