#!/usr/bin/env bash
# Usage: hack/e2e/cluster.sh up       start a single-node Kubernetes cluster on this machine and wait until it is Ready
#        hack/e2e/cluster.sh down     stop everything `up` started and remove every trace (idempotent)
#        hack/e2e/cluster.sh env      print the variables a shell needs to use it (KUBECONFIG, ...)
#
# A real node, not envtest: containerd + runc (Debian packages) with their own config, root, state and socket;
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy built by hack/tools.sh from the
# pinned Kubernetes release; kube-router's network policy controller (NetworkPolicy enforcement) built from its
# module; a bridge CNI network with host-local IPAM; CoreDNS. Every file lives under $E2E_DIR
# (TOKENVAULT_E2E_DIR, default /var/tmp/tokenvault-e2e), which `down` removes (the logs move to $E2E_DIR.logs).
#
# The pod and Service networks exist only on the bridge $E2E_BRIDGE of this machine: no masquerade, and a FORWARD
# rule drops whatever comes from the bridge towards any other interface, so every byte of the test stays here.
#
# What this machine needs that a stock kubelet setup would not (docs/kubernetes.md, "What a real install taught"):
# - cgroup v1: KubeletConfiguration failCgroupV1: false and the cgroupfs driver (containerd: SystemdCgroup false);
# - negative oom_score_adj is refused even to root: containerd's restrict_oom_score_adj = true, or every pod
#   sandbox fails with "can't get final child's PID from pipe: EOF".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PKI=$E2E_DIR/pki
LOGS=$E2E_DIR/logs
PIDS=$E2E_DIR/pids
ETCD_CLIENT_PORT=23790  # not 2379: other tests of this machine run their own etcd
ETCD_PEER_PORT=23800
E2E_CHAIN=TOKENVAULT-E2E

# --- processes ----------------------------------------------------------------------------------------------------

# start NAME COMMAND...: runs COMMAND in its own session, output to $LOGS/NAME.log, pid to $PIDS/NAME.pid.
start() {
  local name=$1
  shift
  log "starting $name"
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
}

running() { [[ -f $PIDS/$1.pid ]] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

# check_running NAME: fails with the end of its log when NAME has exited.
check_running() {
  running "$1" || { tail -n 30 "$LOGS/$1.log" >&2 || true; die "$1 exited (log above; $LOGS/$1.log)"; }
}

any_alive() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
  return 1
}

# stop NAME...: SIGTERM to each at once, SIGKILL to what still runs 10 s later.
stop() {
  local name pids=()
  for name in "$@"; do
    [[ -f $PIDS/$name.pid ]] || continue
    pids+=("$(cat "$PIDS/$name.pid")")
    rm -f "$PIDS/$name.pid"
  done
  ((${#pids[@]} > 0)) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do any_alive "${pids[@]}" || return 0; sleep 0.2; done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# --- certificates -------------------------------------------------------------------------------------------------

# cert NAME CN [O] [SANS] [USAGE]: a key and a certificate signed by the cluster CA.
cert() {
  local name=$1 cn=$2 org=${3:-} sans=${4:-} usage=${5:-clientAuth}
  local subject="/CN=$cn"
  [[ -n $org ]] && subject="/O=$org$subject"
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 2 \
    -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
}

kubeconfig() {
  local name=$1
  cat >"$PKI/$name.kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: https://$NODE_IP:$API_PORT
      certificate-authority: $PKI/ca.crt
users:
  - name: $name
    user:
      client-certificate: $PKI/$name.crt
      client-key: $PKI/$name.key
contexts:
  - name: e2e
    context: {cluster: e2e, user: $name}
current-context: e2e
KCFG
}

make_pki() {
  mkdir -p "$PKI"
  openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=tokenvault-e2e-ca" -days 2 -out "$PKI/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:$KUBERNETES_SVC_IP,IP:$NODE_IP,IP:127.0.0.1" \
    serverAuth
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kube-proxy system:kube-proxy
  cert kubelet "system:node:$NODE_NAME" system:nodes
  for name in admin controller-manager scheduler kube-proxy kubelet; do kubeconfig "$name"; done
  # The service account token keys.
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# --- network ------------------------------------------------------------------------------------------------------

setup_network() {
  # Bridged pod traffic must pass iptables (kube-proxy's Service rules); forwarding stays confined to the bridge.
  modprobe br_netfilter 2>/dev/null || true
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
    die "the kernel has no br_netfilter (bridge-nf-call-iptables): Services cannot work on a bridge network"
  sysctl -q net.bridge.bridge-nf-call-iptables > "$E2E_DIR/sysctl.before" 2>/dev/null || true
  sysctl -q net.ipv4.ip_forward >> "$E2E_DIR/sysctl.before"
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.ipv4.ip_forward=1
  if ! ip link show "$E2E_BRIDGE" >/dev/null 2>&1; then
    ip link add "$E2E_BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$E2E_BRIDGE"
  ip link set "$E2E_BRIDGE" up
  # Nothing from the bridge leaves through another interface.
  iptables -w -N "$E2E_CHAIN" 2>/dev/null || iptables -w -F "$E2E_CHAIN"
  iptables -w -A "$E2E_CHAIN" -i "$E2E_BRIDGE" ! -o "$E2E_BRIDGE" -j DROP
  iptables -w -C FORWARD -j "$E2E_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$E2E_CHAIN"
  mkdir -p "$E2E_DIR/cni/net.d" "$E2E_DIR/cni/ipam"
  cat >"$E2E_DIR/cni/net.d/10-tokenvault-e2e.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "tokenvault-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$E2E_BRIDGE",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$E2E_DIR/cni/ipam",
        "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$NODE_IP" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
CNI
  ls /var/run/netns 2>/dev/null | grep '^cni-' >"$E2E_DIR/netns.before" || true
}

# --- components ---------------------------------------------------------------------------------------------------

start_etcd() {
  mkdir -p "$E2E_DIR/etcd"
  start etcd "$ETCD" --name e2e --data-dir "$E2E_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn
}

start_apiserver() {
  start kube-apiserver "$KUBE_APISERVER" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false --v=1
}

start_controllers() {
  start kube-controller-manager "$KUBE_CONTROLLER_MANAGER" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
    --use-service-account-credentials --leader-elect=false --bind-address 127.0.0.1 --v=1
  start kube-scheduler "$KUBE_SCHEDULER" \
    --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" \
    --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --v=1
}

start_containerd() {
  mkdir -p "$E2E_DIR/containerd"
  cat >"$E2E_DIR/containerd/config.toml" <<TOML
version = 2
root = "$E2E_DIR/containerd/root"
state = "$E2E_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$E2E_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This machine refuses a negative oom_score_adj even to root; the kubelet asks -998 for sandboxes.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$E2E_DIR/cni/net.d"
TOML
  start containerd containerd --config "$E2E_DIR/containerd/config.toml"
  wait_for 30 "containerd" ctr version || { check_running containerd; die "containerd did not answer"; }
}

start_kubelet() {
  mkdir -p "$E2E_DIR/kubelet"
  : >"$E2E_DIR/kubelet/resolv.conf" # no upstream DNS: nothing outside this machine exists for the pods
  cat >"$E2E_DIR/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 (hybrid); Kubernetes 1.35+ refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$DNS_SVC_IP]
resolvConf: $E2E_DIR/kubelet/resolv.conf
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
address: $NODE_IP
serializeImagePulls: false
podLogsDir: $E2E_DIR/kubelet/pod-logs
# A test node: never evict or garbage-collect the imported images because the disk of this machine fills up.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
  start kubelet "$KUBELET" --config "$E2E_DIR/kubelet/config.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
    --root-dir "$E2E_DIR/kubelet/root" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
}

start_kube_proxy() {
  cat >"$E2E_DIR/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
bindAddress: $NODE_IP
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [$NODE_IP/32]
# Leave the machine's conntrack sysctls alone.
conntrack: {maxPerCore: 0}
YAML
  start kube-proxy "$KUBE_PROXY" --config "$E2E_DIR/kube-proxy.yaml" --v=1
}

# kube-router's network policy controller, alone (no routing, no service proxy): the bridge plugin enforces no
# NetworkPolicy, so without it the chart's policies would be objects nobody applies. It turns each policy into
# iptables rules and ipsets on the FORWARD path of the bridged pod traffic (br_netfilter). It runs with the admin
# credentials: a test cluster's component, like the others here.
start_kube_router() {
  start kube-router "$KUBE_ROUTER" --kubeconfig "$KUBECONFIG_ADMIN" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range "$SERVICE_CIDR" \
    --health-port 20244 --metrics-port 0 --v=1
}
kube_router_healthy() { curl -fs --max-time 2 http://127.0.0.1:20244/healthz >/dev/null; }

# CoreDNS: the chart's etcd members and API find each other by Service DNS names. Runs non-root on port 53 with the
# safe sysctl ip_unprivileged_port_start; no `forward`: there is no DNS beyond the cluster.
start_coredns() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "0"}]
      containers:
        - name: coredns
          image: $COREDNS_IMAGE
          imagePullPolicy: Never
          args: [-conf, /etc/coredns/Corefile]
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
          readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
          livenessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
          resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 128Mi}}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
          volumeMounts: [{name: config, mountPath: /etc/coredns}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_SVC_IP
  selector: {k8s-app: kube-dns}
  ports:
    - {name: dns, port: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, protocol: TCP}
YAML
}

api_ready() { curl -fsk --max-time 2 "https://$NODE_IP:$API_PORT/readyz" >/dev/null; }
node_ready() {
  [[ $(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

resolve_tools() {
  ETCD=$(tool etcd)
  KUBE_APISERVER=$(tool kube-apiserver)
  KUBE_CONTROLLER_MANAGER=$(tool kube-controller-manager)
  KUBE_SCHEDULER=$(tool kube-scheduler)
  KUBELET=$(tool kubelet)
  KUBE_PROXY=$(tool kube-proxy)
  KUBE_ROUTER=$(tool kube-router)
  KUBECTL=$(tool kubectl)
}

up() {
  need_root
  ensure_packages
  resolve_tools
  eval "$("$E2E_HACK/images.sh" names)"
  if [[ -d $E2E_DIR ]]; then
    log "a previous run left $E2E_DIR: cleaning it first"
    down
  fi
  mkdir -p "$E2E_DIR" "$LOGS" "$PIDS"
  printf 'KUBE_PROXY=%s\nKUBE_ROUTER=%s\n' "$KUBE_PROXY" "$KUBE_ROUTER" >"$E2E_DIR/tools.env"
  local started=$SECONDS
  make_pki
  setup_network
  start_containerd
  log "importing the images into containerd"
  "$E2E_HACK/images.sh" import
  start_etcd
  start_apiserver
  wait_for 60 "kube-apiserver /readyz" api_ready || { check_running etcd; check_running kube-apiserver; die "kube-apiserver is not ready"; }
  start_controllers
  start_kube_proxy
  start_kubelet
  wait_for 90 "node $NODE_NAME Ready" node_ready || { check_running kubelet; die "node $NODE_NAME is not Ready (see $LOGS/kubelet.log)"; }
  start_kube_router
  wait_for 60 "kube-router's network policy controller" kube_router_healthy ||
    { check_running kube-router; die "kube-router is not healthy (see $LOGS/kube-router.log)"; }
  # The default ServiceAccount comes from the controller-manager: pods cannot be created before it exists.
  wait_for 60 "the default ServiceAccount" kubectl -n kube-system get serviceaccount default
  start_coredns
  kubectl -n kube-system rollout status deployment/coredns --timeout=120s >&2 ||
    { kubectl -n kube-system describe pods -l k8s-app=kube-dns >&2 || true; die "CoreDNS did not become ready"; }
  log "cluster ready in $((SECONDS - started))s (KUBECONFIG=$KUBECONFIG_ADMIN)"
}

# --- teardown -----------------------------------------------------------------------------------------------------

down() {
  need_root
  [[ -d $E2E_DIR ]] || return 0
  log "stopping the cluster under $E2E_DIR"
  stop kubelet kube-router kube-proxy kube-scheduler kube-controller-manager
  # Every container and pod sandbox, while containerd still answers.
  if running containerd; then
    local task
    for task in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true; done
    sleep 1
    for task in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  # Shims this containerd started (they outlive it by design): found by the socket address they serve.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true); do kill -KILL "$pid" 2>/dev/null || true; done
  stop kube-apiserver etcd
  # Mounts under the state directory (sandbox shm, overlay roots, volumes), innermost first.
  local mount
  for mount in $(findmnt -rn -o TARGET | grep "^$E2E_DIR/" | sort -r); do umount -l "$mount" 2>/dev/null || true; done
  # The pods' network namespaces (the CNI DEL never ran), only those that appeared during this run.
  local ns
  for ns in $(ls /var/run/netns 2>/dev/null | grep '^cni-' || true); do
    grep -qx "$ns" "$E2E_DIR/netns.before" 2>/dev/null || ip netns delete "$ns" 2>/dev/null || true
  done
  # kube-proxy's and the kubelet's iptables chains.
  local kube_proxy
  kube_proxy=$(sed -n 's/^KUBE_PROXY=//p' "$E2E_DIR/tools.env" 2>/dev/null || true)
  [[ -x $kube_proxy ]] && { "$kube_proxy" --cleanup >/dev/null 2>&1 || true; }
  # kube-router's chains and ipsets.
  local kube_router
  kube_router=$(sed -n 's/^KUBE_ROUTER=//p' "$E2E_DIR/tools.env" 2>/dev/null || true)
  [[ -x $kube_router ]] && { "$kube_router" --cleanup-config >/dev/null 2>&1 || true; }
  local table chain
  for table in filter nat mangle; do
    for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY; do
      iptables -w -t "$table" -S 2>/dev/null | awk -v c="$chain" '$1 == "-A" && $0 ~ "-j " c "( |$)" { $1 = "-D"; print }' |
        while read -r rule; do eval "iptables -w -t $table $rule" 2>/dev/null || true; done
      iptables -w -t "$table" -F "$chain" 2>/dev/null || true
      iptables -w -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
  iptables -w -D FORWARD -j "$E2E_CHAIN" 2>/dev/null || true
  iptables -w -F "$E2E_CHAIN" 2>/dev/null || true
  iptables -w -X "$E2E_CHAIN" 2>/dev/null || true
  ip link delete "$E2E_BRIDGE" 2>/dev/null || true
  # Veths left from the pods' side are gone with their namespaces; the sysctls as they were.
  if [[ -f $E2E_DIR/sysctl.before ]]; then
    sed 's/ = /=/' "$E2E_DIR/sysctl.before" | while read -r setting; do sysctl -qw "$setting" 2>/dev/null || true; done
  fi
  # The kubelet's symlinks to container logs (/var/log/containers is not configurable) and its empty pod cgroups.
  find /var/log/containers -maxdepth 1 -type l -lname "$E2E_DIR/*" -delete 2>/dev/null || true
  find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods -depth -type d -exec rmdir {} + 2>/dev/null || true
  rm -rf "$E2E_DIR.logs"
  [[ -d $LOGS ]] && mv "$LOGS" "$E2E_DIR.logs"
  rm -rf "$E2E_DIR"
  log "stopped; logs in $E2E_DIR.logs"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0 # sourced: the functions only
case ${1:-} in
  up) up ;;
  down) down ;;
  env)
    echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
    echo "export CONTAINERD_ADDRESS=$CONTAINERD_SOCK"
    ;;
  *)
    echo "usage: $0 up|down|env" >&2
    exit 2
    ;;
esac
