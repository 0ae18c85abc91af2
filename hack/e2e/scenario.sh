#!/usr/bin/env bash
# Usage: hack/e2e/scenario.sh      (against the cluster of hack/e2e/cluster.sh up, with the images imported)
#
# The chart from this tree, the image built from this tree, on a real node, each step an assertion with a clear
# failure message; the pods' state and logs are printed when one fails, and a report (step timings, restarts, memory
# of every pod and of the control plane) at the end either way.
#   1. helm install into a namespace enforcing the restricted Pod Security level; every pod Running and Ready.
#   2. kubectl apply -k config/samples: every tokenvault resource Ready, the application key in its Secret.
#   3. the official SDKs from this machine through the API Service's ClusterIP: a card token, the sample reactor;
#      the sample proxy pointed at an HTTPS echo pod in the cluster: the detokenized number arrives there;
#      the same SDK calls from a pod in the cluster, to the API Service's DNS name, with the key from its Secret;
#      a dedicated-worker Tenant: its own worker Deployment, its reactor answers with the shared workers at zero.
#   4. NetworkPolicy enforced (kube-router's policy controller next to the bridge plugin): a pod of no component and
#      a shared worker cannot reach etcd or the dedicated worker; each can reach the API; the API reaches them all.
#   5. faults under a bounded load of token writes and reactor calls: an API pod, then a worker pod deleted; no
#      500, every 503 with Retry-After, every acknowledged token reads back.
#      Then etcd (on a hostPath PersistentVolume) away for 20 s: 503 with Retry-After while it is away, never a refused
#      connection (the API stays Ready), nothing lost.
#   6. helm upgrade with one changed value completes on this 2-CPU node and keeps every token.
#   7. a rolling restart of the API under load: no error, no dropped connection. Then `tokenvault audit verify` in an
#      API pod: every tenant's audit log intact, the load's tenant written in several lanes (one per API process).
#   8. controller failover: two replicas, the leader's process frozen (SIGSTOP); the standby takes the Lease within
#      the lease duration plus its retry periods and reconciles a formula changed meanwhile; thawed, the old leader
#      does not take the Lease back.
#   9. etcd from 1 to 3 members the documented way (member add as learner, upgrade, promote; the second upgrade with
#      values-ha.yaml): three voting members, every token acknowledged so far reads back, and a member deleted under
#      load costs no acknowledged write.
#  10. the etcd snapshot and defragmentation CronJobs run once: the snapshot lands on its volume, without the KEK.
#  11. helm uninstall keeps the CRDs, the custom resources and the key-encryption key Secret.
#  12. PostgreSQL as the store (hack/e2e/scenario-postgres.sh): a second install, in its own namespace, on a
#      PostgreSQL StatefulSet of this run (TLS, verify-full): the samples and the SDKs, the tokens in PostgreSQL;
#      only the API pods reach port 5432; the PostgreSQL pod deleted under load loses no acknowledged write; a
#      helm upgrade rolling the API pods under load answers every call and keeps every token; audit verify.
#
# TOKENVAULT_E2E_PHASES (default "etcd postgres") runs only some of them: "postgres" skips steps 1-11 (a quicker
# look at the PostgreSQL install; `make e2e` and CI run both).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAMESPACE=${TOKENVAULT_E2E_NAMESPACE:-tokenvault-e2e}
RELEASE=tokenvault
LOAD_SECONDS=${TOKENVAULT_E2E_LOAD_SECONDS:-25}
PHASES=" ${TOKENVAULT_E2E_PHASES:-etcd postgres} "
WORK=$E2E_DIR/scenario
mkdir -p "$WORK"
KUBECTL=$(tool kubectl)
HELM=$(tool helm)
eval "$("$E2E_HACK/images.sh" names)"
export HELM_CACHE_HOME=$WORK/helm/cache HELM_CONFIG_HOME=$WORK/helm/config HELM_DATA_HOME=$WORK/helm/data

REPORT=$WORK/report.txt
: >"$REPORT"
STEP_STARTED=$SECONDS
CURRENT_STEP=""
step() {
  if [[ -n $CURRENT_STEP ]]; then
    printf '  %-58s %4ss\n' "$CURRENT_STEP" "$((SECONDS - STEP_STARTED))" >>"$REPORT"
  fi
  CURRENT_STEP=$1
  STEP_STARTED=$SECONDS
  [[ -n $1 ]] && log "step: $1"
  return 0
}
note() { echo "  $*" >>"$REPORT"; log "$*"; }

# --- diagnostics --------------------------------------------------------------------------------------------------

diagnose() {
  echo "----- pods -----" >&2
  kubectl get pods -A -o wide >&2 || true
  echo "----- events ($NAMESPACE) -----" >&2
  kubectl -n "$NAMESPACE" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 30 >&2 || true
  local pod
  for pod in $(kubectl -n "$NAMESPACE" get pods -o name 2>/dev/null); do
    echo "----- logs $pod -----" >&2
    kubectl -n "$NAMESPACE" logs "$pod" --all-containers --tail=40 >&2 2>&1 || true
    kubectl -n "$NAMESPACE" logs "$pod" --all-containers --previous --tail=20 >/dev/null 2>&1 &&
      { echo "----- previous logs $pod -----" >&2; kubectl -n "$NAMESPACE" logs "$pod" --all-containers --previous --tail=20 >&2 || true; }
  done
}

# snapshot: restarts and memory of every pod, taken before helm uninstall (and again on a failure). The kubelet's
# stats summary gives each container's RSS (no metrics-server needed).
SNAPSHOT=$WORK/pods.txt
POSTGRES_SNAPSHOT=$WORK/pods-postgres.txt
rm -f "$SNAPSHOT" "$POSTGRES_SNAPSHOT" # a kept cluster's WORK has the last run's
# snapshot [FILE]: to $SNAPSHOT (taken before the etcd install's helm uninstall), or FILE (the PostgreSQL install's).
snapshot() {
  {
    echo "----- pods: RSS, restarts -----"
    kubectl get --raw "/api/v1/nodes/$NODE_NAME/proxy/stats/summary" 2>/dev/null |
      node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
          for (const pod of JSON.parse(s).pods ?? []) {
            const rss = (pod.containers ?? []).reduce((sum, c) => sum + (c.memory?.rssBytes ?? 0), 0);
            console.log(`  ${(pod.podRef.namespace + "/" + pod.podRef.name).padEnd(60)} ${(rss / 1048576).toFixed(0).padStart(5)} MiB`);
          }
        });' || echo "  (the kubelet stats summary did not answer)"
    kubectl get pods -A -o custom-columns='POD:.metadata.name,RESTARTS:.status.containerStatuses[*].restartCount' --no-headers |
      awk '{ printf "  restarts %-51s %s\n", $1, $2 }'
    echo "----- control plane RSS -----"
    local pidfile
    for pidfile in "$E2E_DIR"/pids/*.pid; do
      printf '  %-58s %5s MiB\n' "$(basename "$pidfile" .pid)" "$(($(ps -o rss= -p "$(cat "$pidfile")" 2>/dev/null || echo 0) / 1024))"
    done
  } >"${1:-$SNAPSHOT}" 2>&1
}

# report: the step timings, then the last snapshot.
report() {
  step ""
  [[ -s $SNAPSHOT || -s $POSTGRES_SNAPSHOT ]] || snapshot
  if [[ -s $SNAPSHOT ]]; then cat "$SNAPSHOT" >>"$REPORT"; fi
  if [[ -s $POSTGRES_SNAPSHOT ]]; then { echo "----- the PostgreSQL install -----"; cat "$POSTGRES_SNAPSHOT"; } >>"$REPORT"; fi
  echo "===== make e2e report =====" >&2
  cat "$REPORT" >&2
}

on_exit() {
  local status=$?
  if ((status != 0)); then
    log "FAILED at step: $CURRENT_STEP"
    diagnose
    if [[ $NAMESPACE == "${POSTGRES_NAMESPACE:-}" ]]; then snapshot "$POSTGRES_SNAPSHOT" || true; else snapshot || true; fi
  fi
  report || true
  exit "$status"
}
trap on_exit EXIT

# --- assertions ---------------------------------------------------------------------------------------------------

# not_ready: the pods that should run (not terminating, not a finished test pod) but are not Ready.
not_ready() {
  kubectl -n "$NAMESPACE" get pods -o jsonpath='{range .items[*]}{.metadata.name}|{.metadata.deletionTimestamp}|{.status.phase}|{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk -F'|' '$2 == "" && $3 != "Succeeded" && $4 != "True" { print $1 }'
}
no_pod_unready() { [[ -z $(not_ready) ]]; }

all_pods_ready() {
  wait_for "${1:-180}" "every pod in $NAMESPACE Ready" no_pod_unready ||
    die "not every pod in $NAMESPACE is Running and Ready: $(not_ready | tr '\n' ' ')"
}

api_url() {
  local ip
  ip=$(kubectl -n "$NAMESPACE" get service -l app.kubernetes.io/component=api -o jsonpath='{.items[0].spec.clusterIP}')
  [[ -n $ip ]] || die "no API Service in $NAMESPACE"
  echo "http://$ip:8080"
}

client() { (cd "$REPO_ROOT" && node "$E2E_HACK/client.mjs" "$@"); }

# check_load FILE WHAT ALLOW_503: the load's failures are only 503s with Retry-After (when ALLOW_503) and no dropped
# connection; every acknowledged write reads back.
check_load() {
  local file=$1 what=$2 allow_503=$3
  node -e '
    const [file, what, allow503] = process.argv.slice(1);
    const s = JSON.parse(require("fs").readFileSync(file, "utf8"));
    const bad = s.failures.filter((f) => !(allow503 === "yes" && f.status === 503 && f.retryAfter));
    console.log(`${what}: ${s.calls} calls, ${s.ok} answered, ${s.acknowledged.length} tokens acknowledged, statuses ${JSON.stringify(s.statuses)}`);
    if (bad.length > 0) {
      console.error(`${what}: ${bad.length} failures that are not a 503 with Retry-After: ${JSON.stringify(bad.slice(0, 5))}`);
      process.exit(1);
    }' "$file" "$what" "$allow_503" >>"$REPORT" 2>&1 || { tail -n 2 "$REPORT" >&2; die "$what: unexpected failures"; }
  tail -n 1 "$REPORT" >&2
  client verify "$BASE" "$KEY" "$file" >&2 || die "$what: acknowledged tokens were lost"
}

# under_load SECONDS NAME ACTION...: runs ACTION while the load runs; waits for the load to end.
under_load() {
  local seconds=$1 name=$2
  shift 2
  client load "$BASE" "$KEY" "$REACTOR_ID" "$seconds" "$WORK/$name.json" >&2 &
  local load_pid=$!
  sleep 3
  "$@"
  wait "$load_pid" || die "$name: the load client failed"
}

# etcd_away SECONDS: the etcd StatefulSet scaled to 0 (its pod stopped) for SECONDS, then back to 1 on its volume.
etcd_away() {
  local seconds=$1
  log "etcd away for ${seconds}s"
  kubectl -n "$NAMESPACE" scale "statefulset/$RELEASE-etcd" --replicas=0 >&2
  sleep "$seconds"
  kubectl -n "$NAMESPACE" scale "statefulset/$RELEASE-etcd" --replicas=1 >&2
}

delete_one() {
  local component=$1 pod
  # jsonpath, not `| head`: under pipefail, head exiting early fails kubectl with SIGPIPE.
  pod=$(kubectl -n "$NAMESPACE" get pods -l "app.kubernetes.io/component=$component,app.kubernetes.io/instance=$RELEASE" \
    --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')
  [[ -n $pod ]] || die "no $component pod to delete"
  pod=pod/$pod
  log "deleting $pod"
  kubectl -n "$NAMESPACE" delete "$pod" --wait=false >&2
  sleep 8
}

# pod_ip SELECTOR, pod_name SELECTOR: of a Running pod of $NAMESPACE.
pod_ip() { kubectl -n "$NAMESPACE" get pods -l "$1" --field-selector=status.phase=Running -o jsonpath='{.items[0].status.podIP}'; }
pod_name() { kubectl -n "$NAMESPACE" get pods -l "$1" --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}'; }
selector_of() {
  kubectl -n "$NAMESPACE" get "$1" -o go-template='{{range $k, $v := .spec.selector.matchLabels}}{{$k}}={{$v}},{{end}}' | sed 's/,$//'
}
# make_probe_pod: a pod of no component in $NAMESPACE (the NetworkPolicy steps probe from it), Ready.
make_probe_pod() {
  kubectl -n "$NAMESPACE" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: e2e-probe, labels: {app: e2e-probe}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 0
  securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
    - name: probe
      image: $CLIENT_IMAGE
      imagePullPolicy: Never
      command: [sleep, "600"]
      resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}
      securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
YAML
  kubectl -n "$NAMESPACE" wait --for=condition=Ready pod/e2e-probe --timeout=60s >&2 || die "the probe pod did not start"
}
# probe POD TARGET...: the probe script run in POD (its image has node), one line per target.
probe() {
  local pod=$1
  shift
  kubectl -n "$NAMESPACE" exec -i "$pod" -- node --input-type=module - "$@" <"$E2E_HACK/probe.mjs"
}
# expect_probe POD WHO OPEN_TARGET CLOSED_TARGET...: OPEN_TARGET answers, every CLOSED_TARGET does not.
expect_probe() {
  local pod=$1 who=$2 open=$3 line
  shift 3
  local out
  out=$(probe "$pod" "$open" "$@") || die "could not run the probe in $pod ($who)"
  echo "$out" | sed "s/^/  $who -> /" >&2
  [[ $(echo "$out" | sed -n 1p) == "$open open" ]] ||
    die "$who could not reach $open, which its policy allows: the probe itself is broken ($out)"
  while read -r line; do
    [[ $line == *" open" ]] && die "$who reached ${line% open}: a NetworkPolicy is not enforced"
  done < <(echo "$out" | sed 1d)
  note "$who: $open open; closed: $*"
}

# --- the scenario -------------------------------------------------------------------------------------------------

# The sample proxy's destination in the cluster: an HTTPS echo pod (hack/e2e/echo.mjs) behind a Service, with a
# certificate of a CA made for the run. A Service address is private, so the chart allows the host name
# (config.outbound.allowedHosts, TOKENVAULT_PROXY_ALLOWED_HOSTS) and trusts the CA (config.outbound.caBundle,
# TOKENVAULT_PROXY_CA_FILE).
ECHO_HOST=e2e-echo.$NAMESPACE.svc
CHART_VALUES=(
  --set "config.outbound.allowedHosts={$ECHO_HOST}" --set config.outbound.caBundle.configMapName=e2e-echo-ca
  --set "image.repository=${TOKENVAULT_IMAGE%:*}" --set "image.tag=${TOKENVAULT_IMAGE##*:}" --set image.pullPolicy=Never
  --set "etcd.image.repository=${ETCD_IMAGE%:*}" --set "etcd.image.tag=${ETCD_IMAGE##*:}" --set etcd.image.pullPolicy=Never
  # No volume provisioner on this node: etcd's claim binds the hostPath PersistentVolume made below.
  --set etcd.persistence.storageClassName=e2e-local --set etcd.persistence.size=1Gi
  # No metrics-server: fixed replica counts.
  --set api.autoscaling.enabled=false --set api.replicas=2
  # The load client goes flat out on one key (about 150 calls a second); during a rolling update the surge pods count
  # as replicas, so each pod's share of the default per-key limits shrinks below that and the load would meet 429s.
  # The limits themselves are tested in the integration tier (rate-limits.test.ts); here they are out of the way.
  --set api.rateLimits.apiPerKey=20000 --set api.rateLimits.callsPerKey=20000
  # Two controllers: one leads, one stands by (the failover step).
  --set controller.replicas=2
  # The etcd maintenance CronJobs (snapshot, defragmentation): run once by hand in their step.
  --set etcd.backup.enabled=true --set etcd.backup.persistence.storageClassName=e2e-local
  --set etcd.backup.persistence.size=1Gi --set etcd.defrag.enabled=true
)

# A cluster kept from an earlier run (TOKENVAULT_E2E_KEEP=1) may hold the previous release: start from nothing.
# remove_previous_namespace: $NAMESPACE and everything in it, when it exists.
remove_previous_namespace() {
  kubectl get namespace "$NAMESPACE" >/dev/null 2>&1 || return 0
  log "removing the previous run's namespace $NAMESPACE"
  kubectl delete -n "$NAMESPACE" -k "$REPO_ROOT/config/samples" --ignore-not-found --timeout=60s >/dev/null 2>&1 || true
  helm uninstall "$RELEASE" -n "$NAMESPACE" --wait >/dev/null 2>&1 || true
  # Without the controller nothing removes the custom resources' finalizers; the namespace would never go.
  for kind in tenants applications reactorformulas reactors proxies; do
    for object in $(kubectl -n "$NAMESPACE" get "$kind.tokenvault.dev" -o name 2>/dev/null); do
      kubectl -n "$NAMESPACE" patch "$object" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
    done
  done
  kubectl delete namespace "$NAMESPACE" --wait=true --timeout=120s >/dev/null
}
remove_previous_namespace

# etcd's volume: a PersistentVolume on a directory of the node (a static one; the node has no provisioner), owned
# by etcd's user (fsGroup does not apply to hostPath). The Pod Security level restricts the pods' own volumes; a
# claim bound to a hostPath volume is allowed.
# make_volume NAME CLAIM: a hostPath PersistentVolume bound ahead to the claim CLAIM of the namespace (the claims are
# alike: without claimRef the etcd backup claim could take a member's volume).
make_volume() {
  local name=$1 claim=$2 dir=$E2E_DIR/volumes/$1
  kubectl delete pv "tokenvault-e2e-$name" --ignore-not-found --wait=true >/dev/null
  rm -rf "$dir"
  mkdir -p "$dir"
  chown 65532:65532 "$dir"
  chmod 0700 "$dir"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: e2e-local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: tokenvault-e2e-$name}
spec:
  capacity: {storage: 8Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: e2e-local
  claimRef: {namespace: $NAMESPACE, name: $claim}
  hostPath: {path: $dir, type: Directory}
YAML
}
# make_etcd_volume N: the volume of member N (the StatefulSet's claim data-<pod>).
make_etcd_volume() { make_volume "etcd-$1" "data-$RELEASE-etcd-$1"; }
if [[ $PHASES == *" etcd "* ]]; then # to the PostgreSQL phase
make_etcd_volume 0
make_volume etcd-backup "$RELEASE-etcd-backup"

# make_echo: the echo's CA (its ConfigMap must exist before helm install: the API pods mount it), its serving
# certificate and the echo Deployment and Service, restricted like every pod of the namespace.
make_echo() {
  local dir=$WORK/echo-tls
  rm -rf "$dir"
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tokenvault-e2e-echo-ca \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$ECHO_HOST" -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s,DNS:%s.cluster.local\n' \
    "$ECHO_HOST" "$ECHO_HOST" >"$dir/tls.ext"
  openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
    -extfile "$dir/tls.ext" -out "$dir/tls.crt" 2>/dev/null
  kubectl -n "$NAMESPACE" create configmap e2e-echo-ca --from-file=ca.crt="$dir/ca.crt" >/dev/null
  kubectl -n "$NAMESPACE" create secret tls e2e-echo-tls --cert="$dir/tls.crt" --key="$dir/tls.key" >/dev/null
  kubectl -n "$NAMESPACE" create configmap e2e-echo --from-file=echo.mjs="$E2E_HACK/echo.mjs" >/dev/null
  kubectl -n "$NAMESPACE" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: e2e-echo, labels: {app: e2e-echo}}
spec:
  replicas: 1
  selector: {matchLabels: {app: e2e-echo}}
  template:
    metadata: {labels: {app: e2e-echo}}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: echo
          image: $CLIENT_IMAGE
          imagePullPolicy: Never
          command: [node, /echo/echo.mjs]
          ports: [{name: https, containerPort: 8443}]
          readinessProbe: {tcpSocket: {port: 8443}, periodSeconds: 2}
          resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 128Mi}}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: script, mountPath: /echo}, {name: tls, mountPath: /tls}]
      volumes:
        - {name: script, configMap: {name: e2e-echo}}
        - {name: tls, secret: {secretName: e2e-echo-tls}}
---
apiVersion: v1
kind: Service
metadata: {name: e2e-echo}
spec:
  selector: {app: e2e-echo}
  ports: [{name: https, port: 8443, targetPort: https}]
YAML
}

step "helm install (restricted namespace), every pod Ready"
kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/warn=restricted >/dev/null
make_echo
helm install "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" "${CHART_VALUES[@]}" --wait --timeout 5m >&2 ||
  die "helm install did not complete"
all_pods_ready
kubectl -n "$NAMESPACE" get pods >&2

step "helm test"
helm test "$RELEASE" -n "$NAMESPACE" --timeout 2m >&2 || die "helm test failed"

step "kubectl apply -k config/samples, every resource Ready"
kubectl apply -n "$NAMESPACE" -k "$REPO_ROOT/config/samples" >&2
for kind in tenants applications reactorformulas reactors proxies; do
  kubectl -n "$NAMESPACE" wait --for=condition=Ready "$kind" --all --timeout=120s >&2 ||
    { kubectl -n "$NAMESPACE" get "$kind" -o yaml >&2; die "the sample $kind are not Ready"; }
done
wait_for 30 "Secret backend-key" kubectl -n "$NAMESPACE" get secret backend-key ||
  die "the controller did not write the application key into Secret backend-key"
KEY=$(kubectl -n "$NAMESPACE" get secret backend-key -o jsonpath='{.data.key}' | base64 -d)
[[ -n $KEY ]] || die "Secret backend-key has no key"
REACTOR_ID=$(kubectl -n "$NAMESPACE" get reactor card-summary -o jsonpath='{.status.id}')
[[ -n $REACTOR_ID ]] || die "the reactor card-summary has no status.id"
BASE=$(api_url)

step "SDKs through the API Service: card token, sample reactor"
client smoke "$BASE" "$KEY" "$REACTOR_ID" >&2 || die "the SDK smoke test through $BASE failed"

step "the sample proxy to an HTTPS echo pod: body detokenized"
kubectl -n "$NAMESPACE" rollout status deployment/e2e-echo --timeout=60s >&2 || die "the echo pod is not Ready"
kubectl -n "$NAMESPACE" patch proxy echo --type merge \
  -p "{\"spec\":{\"destinationUrl\":\"https://$ECHO_HOST:8443/anything\"}}" >&2
PROXY_KEY=$(kubectl -n "$NAMESPACE" get secret echo-proxy-key -o jsonpath='{.data.key}' | base64 -d)
[[ -n $PROXY_KEY ]] || die "Secret echo-proxy-key has no key"
CREDENTIAL=$(kubectl -n "$NAMESPACE" get secret echo-credentials -o jsonpath='{.data.token}' | base64 -d)
proxy_echoes() { client proxy "$BASE" "$KEY" "$PROXY_KEY" "$CREDENTIAL"; }
# The controller reconciles the new destination within a watch; until then the proxy still goes to httpbin.org,
# which nothing on this machine reaches.
wait_for 60 "the sample proxy to reach the echo pod" proxy_echoes ||
  { proxy_echoes >&2 || true; die "the sample proxy did not bring the detokenized body to https://$ECHO_HOST:8443 (reason above)"; }
proxy_echoes >&2

step "SDKs from a pod: API Service by DNS name, key from Secret"
# The SDKs are dev dependencies, not in the image: the client pod runs the Node base image with this tree's
# hack/e2e and node_modules mounted from the node (hostPath), so it lives in a namespace of its own (the restricted
# level refuses hostPath) with a copy of the application key's Secret.
CLIENT_NAMESPACE=$NAMESPACE-client
API_HOST=$(kubectl -n "$NAMESPACE" get service -l 'app.kubernetes.io/component=api,!tokenvault.dev/metrics' -o jsonpath='{.items[0].metadata.name}')
[[ -n $API_HOST ]] || die "no API Service in $NAMESPACE"
API_DNS_URL=http://$API_HOST.$NAMESPACE.svc:8080
kubectl delete namespace "$CLIENT_NAMESPACE" --ignore-not-found --wait=true --timeout=60s >/dev/null
kubectl create namespace "$CLIENT_NAMESPACE" >/dev/null
kubectl -n "$NAMESPACE" get secret backend-key -o jsonpath='{.data.key}' | base64 -d |
  kubectl -n "$CLIENT_NAMESPACE" create secret generic backend-key --from-file=key=/dev/stdin >/dev/null
kubectl -n "$NAMESPACE" get secret echo-proxy-key -o jsonpath='{.data.key}' | base64 -d |
  kubectl -n "$CLIENT_NAMESPACE" create secret generic echo-proxy-key --from-file=key=/dev/stdin >/dev/null
kubectl -n "$CLIENT_NAMESPACE" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: sdk-client}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532}
  containers:
    - name: sdk
      image: $CLIENT_IMAGE
      imagePullPolicy: Never
      workingDir: /e2e
      env:
        - {name: TOKENVAULT_E2E_KEY, valueFrom: {secretKeyRef: {name: backend-key, key: key}}}
        - {name: PROXY_KEY, valueFrom: {secretKeyRef: {name: echo-proxy-key, key: key}}}
      command:
        - sh
        - -c
        - >-
          node hack/e2e/client.mjs smoke $API_DNS_URL - $REACTOR_ID &&
          node hack/e2e/client.mjs proxy $API_DNS_URL - "\$PROXY_KEY"
      volumeMounts:
        - {name: e2e, mountPath: /e2e/hack/e2e, readOnly: true}
        - {name: node-modules, mountPath: /e2e/node_modules, readOnly: true}
  volumes:
    - {name: e2e, hostPath: {path: $E2E_HACK, type: Directory}}
    - {name: node-modules, hostPath: {path: $(readlink -f "$REPO_ROOT/node_modules"), type: Directory}}
YAML
client_pod_done() {
  [[ $(kubectl -n "$CLIENT_NAMESPACE" get pod sdk-client -o jsonpath='{.status.phase}') == @(Succeeded|Failed) ]]
}
wait_for 120 "the SDK client pod to finish" client_pod_done || true
kubectl -n "$CLIENT_NAMESPACE" logs sdk-client >&2 || true
[[ $(kubectl -n "$CLIENT_NAMESPACE" get pod sdk-client -o jsonpath='{.status.phase}') == Succeeded ]] ||
  { kubectl -n "$CLIENT_NAMESPACE" describe pod sdk-client | tail -n 20 >&2;
    die "the SDKs in a pod could not create a card token, call the reactor and the proxy through $API_DNS_URL (logs above)"; }
kubectl delete namespace "$CLIENT_NAMESPACE" --wait=false >/dev/null

step "dedicated-worker tenant: its own Deployment runs its code"
# Tenant solo with spec.runtime.dedicated: the controller makes Deployment tokenvault-worker-solo (the chart's
# image: controller.workerImage defaults to it, so dedicatedWorkers.allowedImages may stay empty) and points the
# vault tenant's worker_url at its Service. With the shared workers scaled to zero, solo's reactor still answers:
# it runs on the dedicated worker.
kubectl -n "$NAMESPACE" apply -f - >&2 <<'YAML'
apiVersion: tokenvault.dev/v1alpha1
kind: Tenant
metadata: {name: solo}
spec:
  displayName: Solo
  managementKeySecretRef: {name: solo-management}
  runtime: {dedicated: true, replicas: 1}
  deletionPolicy: Retain
---
apiVersion: tokenvault.dev/v1alpha1
kind: Application
metadata: {name: solo-backend}
spec:
  tenantRef: {name: solo}
  displayName: Solo backend
  type: private
  permissions: [token:create, token:read, token:use]
  keySecretRef: {name: solo-backend-key}
---
apiVersion: tokenvault.dev/v1alpha1
kind: ReactorFormula
metadata: {name: solo-last4}
spec:
  tenantRef: {name: solo}
  displayName: Solo last4
  code: |
    module.exports = async function (req) {
      return { raw: { last4: req.args.card.number.slice(-4), runtime: 'dedicated' } };
    };
  # Only the declared parameters reach the code.
  requestParameters:
    - {name: card.number, description: The card number, type: string}
---
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: solo-last4}
spec:
  tenantRef: {name: solo}
  displayName: Solo last4
  formulaRef: {name: solo-last4}
  applicationRef: {name: solo-backend}
YAML
kubectl -n "$NAMESPACE" wait --for=condition=RuntimeReady tenant/solo --timeout=180s >&2 ||
  { kubectl -n "$NAMESPACE" get tenant solo -o yaml >&2; die "tenant solo's dedicated workers are not available (RuntimeReady)"; }
kubectl -n "$NAMESPACE" get deployment tokenvault-worker-solo >&2 || die "no Deployment tokenvault-worker-solo for tenant solo"
for kind in applications reactorformulas reactors; do
  kubectl -n "$NAMESPACE" wait --for=condition=Ready "$kind" --all --timeout=120s >&2 ||
    { kubectl -n "$NAMESPACE" get "$kind" -o yaml >&2; die "tenant solo's $kind are not Ready"; }
done
wait_for 30 "Secret solo-backend-key" kubectl -n "$NAMESPACE" get secret solo-backend-key ||
  die "the controller did not write solo's application key into Secret solo-backend-key"
SOLO_KEY=$(kubectl -n "$NAMESPACE" get secret solo-backend-key -o jsonpath='{.data.key}' | base64 -d)
SOLO_REACTOR_ID=$(kubectl -n "$NAMESPACE" get reactor solo-last4 -o jsonpath='{.status.id}')
[[ -n $SOLO_KEY && -n $SOLO_REACTOR_ID ]] || die "tenant solo has no application key or reactor id"
# The chart's workers only: the dedicated Deployment carries the worker component label too.
SHARED_SELECTOR=app.kubernetes.io/component=worker,app.kubernetes.io/instance=$RELEASE
SHARED_WORKERS=$(kubectl -n "$NAMESPACE" get deployment -l "$SHARED_SELECTOR" -o name)
[[ $SHARED_WORKERS == deployment.apps/* && $SHARED_WORKERS != *$'\n'* ]] || die "not one shared worker Deployment: $SHARED_WORKERS"
kubectl -n "$NAMESPACE" scale "$SHARED_WORKERS" --replicas=0 >&2
no_shared_worker() { [[ -z $(kubectl -n "$NAMESPACE" get pods -l "$SHARED_SELECTOR" -o name) ]]; }
wait_for 60 "the shared workers to be gone" no_shared_worker || die "the shared worker pods did not go away"
solo_answers() { [[ $(client react "$BASE" "$SOLO_KEY" "$SOLO_REACTOR_ID" 2>/dev/null) == *'"runtime":"dedicated"'* ]]; }
wait_for 30 "tenant solo's reactor to answer on its dedicated worker" solo_answers ||
  { client react "$BASE" "$SOLO_KEY" "$SOLO_REACTOR_ID" >&2 || true;
    die "with no shared worker running, tenant solo's reactor did not answer: it does not run on its dedicated worker"; }
note "tenant solo's reactor answered from its dedicated worker with the shared workers scaled to 0"
kubectl -n "$NAMESPACE" scale "$SHARED_WORKERS" --replicas=2 >&2
kubectl -n "$NAMESPACE" rollout status "$SHARED_WORKERS" --timeout=120s >&2 || die "the shared workers did not come back"
client smoke "$BASE" "$KEY" "$REACTOR_ID" >&2 || die "tenant acme's reactor does not answer with the shared workers back"

step "NetworkPolicy enforced (kube-router): only the API reaches etcd and the workers"
# The bridge plugin enforces nothing; kube-router's policy controller (hack/e2e/cluster.sh) applies the chart's and
# the controller's NetworkPolicies. A pod of the namespace that is none of the chart's components, a shared worker
# (where any tenant's reactor code runs) and an API pod each try TCP connections; each probe also reaches something
# it is allowed to, so a "closed" is the policy, not a broken network.
API_PODS=app.kubernetes.io/component=api,app.kubernetes.io/instance=$RELEASE
ETCD_AT=$(pod_ip "app.kubernetes.io/component=etcd,app.kubernetes.io/instance=$RELEASE"):2379
API_AT=$(pod_ip "$API_PODS"):8080
SHARED_WORKER_AT=$(pod_ip "$SHARED_SELECTOR"):8080
SOLO_WORKER_AT=$(pod_ip "$(selector_of deployment/tokenvault-worker-solo)"):8080
[[ $ETCD_AT != :* && $API_AT != :* && $SHARED_WORKER_AT != :* && $SOLO_WORKER_AT != :* ]] ||
  die "could not find the pod addresses (etcd $ETCD_AT, API $API_AT, worker $SHARED_WORKER_AT, solo $SOLO_WORKER_AT)"
make_probe_pod
expect_probe e2e-probe "a pod of no component" "$API_AT" "$ETCD_AT" "$SHARED_WORKER_AT" "$SOLO_WORKER_AT"
expect_probe "$(pod_name "$SHARED_SELECTOR")" "a shared worker" "$API_AT" "$ETCD_AT" "$SOLO_WORKER_AT"
# The API may reach both (its calls to them work throughout); shown so the report has the other side.
out=$(probe "$(pod_name "$API_PODS")" "$ETCD_AT" "$SHARED_WORKER_AT" "$SOLO_WORKER_AT") || die "could not run the probe in an API pod"
[[ $out == *"$ETCD_AT open"*"$SHARED_WORKER_AT open"*"$SOLO_WORKER_AT open"* ]] ||
  die "an API pod cannot reach etcd or a worker: $out"
note "an API pod: $ETCD_AT, $SHARED_WORKER_AT and $SOLO_WORKER_AT open"
kubectl -n "$NAMESPACE" delete pod e2e-probe --wait=false >/dev/null

step "fault: an API pod deleted under load"
under_load "$LOAD_SECONDS" fault-api delete_one api
check_load "$WORK/fault-api.json" "API pod deleted" yes
all_pods_ready

step "fault: a worker pod deleted under load"
under_load "$LOAD_SECONDS" fault-worker delete_one worker
check_load "$WORK/fault-worker.json" "worker pod deleted" yes
all_pods_ready

step "fault: etcd away 20 s under load (longer than the API's readiness probe)"
# The store is away for longer than the API's readiness probe takes to give up (2 x 5 s): writes and reads fail as
# 503 with Retry-After, never 500 and never a refused connection (the API replicas stay in the Service, ADR 0007);
# the API recovers by itself; the acknowledged writes are on the volume.
under_load $((LOAD_SECONDS + 20)) fault-etcd etcd_away 20
check_load "$WORK/fault-etcd.json" "etcd away 20 s" yes
all_pods_ready

step "helm upgrade with a changed value, on 2 CPUs"
helm upgrade "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" "${CHART_VALUES[@]}" \
  --set config.logLevel=debug --wait --timeout 5m >&2 ||
  { kubectl -n "$NAMESPACE" get pods -o wide >&2; die "helm upgrade did not complete (Pending surge pods? see the events)"; }
all_pods_ready
client verify "$BASE" "$KEY" "$WORK/fault-worker.json" >&2 || die "tokens were lost across the upgrade"
client smoke "$BASE" "$KEY" "$REACTOR_ID" >&2 || die "the API does not answer after the upgrade"

step "rolling restart of the API under load: no error"
restart_api() {
  local deployment
  deployment=$(kubectl -n "$NAMESPACE" get deployment -l app.kubernetes.io/component=api -o name)
  kubectl -n "$NAMESPACE" rollout restart "$deployment" >&2
  kubectl -n "$NAMESPACE" rollout status "$deployment" --timeout=180s >&2
}
under_load "$LOAD_SECONDS" rolling-restart restart_api
check_load "$WORK/rolling-restart.json" "API rolling restart" no

step "every tenant's audit log verifies after the faults (a lane per API process that wrote to it)"
# The loads above went through API pods that were deleted, restarted and cut off from etcd: each appended to its own
# lane of the tenant's log (docs/adr/0008-audit-lanes.md). `tokenvault audit verify` in an API pod (its environment
# names etcd and its client certificate) walks every tenant's lanes: no link broken, no acknowledged entry missing.
# A pod of the old ReplicaSet may still be terminating: a run that did not get to its summary is tried again.
for attempt in 1 2 3; do
  status=0
  out=$(kubectl -n "$NAMESPACE" exec "$(pod_name "$API_PODS")" -- node --no-node-snapshot dist/cli.js audit verify 2>&1) ||
    status=$?
  [[ $out == *"tenants checked"* ]] && break
  sleep 5
done
((status == 0)) || die "tokenvault audit verify: exit $status: $(echo "$out" | grep -v 'chain intact' | tail -n 5)"
lanes=$(echo "$out" | grep -o 'in [0-9]* lanes' | awk '{ if ($2 > max) max = $2 } END { print max + 0 }')
(( lanes >= 2 )) || die "expected a tenant written by several API processes (lanes), found at most $lanes: $out"
note "$(echo "$out" | tail -n 1); at most $lanes lanes in one tenant"

step "controller failover: the leader frozen, the standby takes over within the lease, a changed formula answers"
# Two controller replicas (CHART_VALUES): one holds the Lease and reconciles, the other stands by. The leader's
# process is frozen (SIGSTOP through containerd: a hung or partitioned leader, which cannot release the Lease the way
# a deleted pod does); the standby takes the Lease once it has not changed for a lease duration, and reconciles the
# formula changed meanwhile. Thawed, the old leader finds the Lease gone and does not take it back.
LEASE=$(kubectl -n "$NAMESPACE" get lease -o name | grep controller | head -n1)
[[ -n $LEASE ]] || die "no controller Lease in $NAMESPACE"
lease_field() { kubectl -n "$NAMESPACE" get "$LEASE" -o jsonpath="{.spec.$1}"; }
CONTROLLER_PODS=app.kubernetes.io/component=controller,app.kubernetes.io/instance=$RELEASE
two_controllers() { [[ $(kubectl -n "$NAMESPACE" get pods -l "$CONTROLLER_PODS" -o name | wc -l) == 2 ]]; }
two_controllers || die "expected two controller pods (controller.replicas=2)"
old_holder=$(lease_field holderIdentity)
leader_pod=""
for pod in $(kubectl -n "$NAMESPACE" get pods -l "$CONTROLLER_PODS" -o jsonpath='{.items[*].metadata.name}'); do
  [[ $old_holder == "$pod"* ]] && leader_pod=$pod
done
[[ -n $leader_pod ]] || die "the Lease holder '$old_holder' is none of the controller pods"
lease_seconds=$(lease_field leaseDurationSeconds)
leader_container=$(kubectl -n "$NAMESPACE" get pod "$leader_pod" -o jsonpath='{.status.containerStatuses[0].containerID}')
leader_container=${leader_container#containerd://}
ctr -n k8s.io tasks kill -s SIGSTOP "$leader_container" >&2 || die "could not freeze the leader's container"
frozen_at=$SECONDS
kubectl -n "$NAMESPACE" patch reactorformula card-summary --type merge -p '{"spec":{"code":"module.exports = async function (req) {\n  return { raw: { last4: req.args.card.number.slice(-4), version: 2 } };\n};\n"}}' >&2
new_holder() { local holder; holder=$(lease_field holderIdentity); [[ -n $holder && $holder != "$old_holder" ]]; }
wait_for $((lease_seconds + 30)) "another controller to take the Lease" new_holder ||
  { ctr -n k8s.io tasks kill -s SIGCONT "$leader_container" >&2 || true; die "no controller took the Lease from the frozen leader"; }
takeover=$((SECONDS - frozen_at))
# Expiry is judged from when the standby last saw the Lease change (the leader renews every retry period, 2 s, and
# the standby reads it as often), and the standby looks every retry period: at most a lease duration plus about two
# retry periods, plus this loop's polling and kubectl's own time on a busy node.
((takeover <= lease_seconds + 8)) ||
  { ctr -n k8s.io tasks kill -s SIGCONT "$leader_container" >&2 || true;
    die "the standby took the Lease ${takeover}s after the leader froze; the lease duration is ${lease_seconds}s"; }
note "leader $leader_pod frozen: $(lease_field holderIdentity) took the Lease after ${takeover}s (lease ${lease_seconds}s)"
new_code_answers() { [[ $(client react "$BASE" "$KEY" "$REACTOR_ID" 2>/dev/null) == *'"version":2'* ]]; }
wait_for 60 "the reactor to answer with the changed formula" new_code_answers ||
  { ctr -n k8s.io tasks kill -s SIGCONT "$leader_container" >&2 || true;
    die "60s after the formula changed (leader frozen) the reactor still runs the old code"; }
note "changed formula answered $((SECONDS - frozen_at))s after the leader froze"
taken_by=$(lease_field holderIdentity)
ctr -n k8s.io tasks kill -s SIGCONT "$leader_container" >&2 || die "could not thaw the old leader"
sleep $((lease_seconds / 3 + 2))
[[ $(lease_field holderIdentity) == "$taken_by" ]] ||
  die "the thawed old leader took the Lease back (holder now $(lease_field holderIdentity), was $taken_by)"
controllers_ready() {
  [[ $(kubectl -n "$NAMESPACE" get pods -l "$CONTROLLER_PODS" -o jsonpath='{range .items[*]}{.status.containerStatuses[0].ready}{"\n"}{end}' | grep -c true) == 2 ]]
}
wait_for 120 "both controller pods Ready" controllers_ready || die "the controller pods are not both Ready after the thaw"

step "etcd from 1 to 3 members (values-ha.yaml) the documented way: no data lost, a member deleted under load"
# docs/kubernetes.md, "From 1 to 3 etcd members": each member added as a learner with etcdctl before it starts,
# promoted once it has caught up; the second upgrade applies values-ha.yaml. This node has 2 CPUs and is one node:
# hack/e2e/values-small-node.yaml keeps the requests small and lets the members share it (requireSeparateNodes off).
ETCD_POD=$RELEASE-etcd
ETCD_PEERS=$RELEASE-etcd-headless.$NAMESPACE.svc:2380
etcdctl() {
  kubectl -n "$NAMESPACE" exec "$ETCD_POD-0" -- /usr/local/bin/etcdctl --endpoints=https://127.0.0.1:2379 \
    --cacert=/etc/etcd/tls/ca.crt --cert=/etc/etcd/tls/tls.crt --key=/etc/etcd/tls/tls.key "$@"
}
member_id() { etcdctl member list | awk -F', ' -v n="$1" '$3 == n { print $1 }'; }
member_started() { etcdctl member list | awk -F', ' -v n="$1" '$3 == n && $2 == "started"' | grep -q .; }
# etcd refuses a member add while any member is unreachable ("etcdserver: unhealthy cluster"), and each step's
# rollout has just restarted the members with new pod addresses: wait until every member answers a quorum read, then
# add (again if etcd still refused it, which added nothing).
cluster_healthy() { etcdctl endpoint health --cluster; }
member_added() { [[ -n $(member_id "$1") ]] || etcdctl member add "$1" --learner --peer-urls="http://$1.$ETCD_PEERS"; }
add_learner() {
  wait_for 120 "every etcd member healthy" cluster_healthy || die "etcd is not healthy before adding $1: $(etcdctl endpoint health --cluster 2>&1)"
  wait_for 60 "$1 added as a learner" member_added "$1" || die "member add $1 failed: $(etcdctl member list)"
}
promote() {
  local id
  id=$(member_id "$1")
  [[ -n $id ]] || die "no member $1 in: $(etcdctl member list)"
  # A learner is promoted once it has caught up with the leader; until then etcd refuses.
  wait_for 90 "$1 to be promoted" etcdctl member promote "$id" || die "member $1 could not be promoted: $(etcdctl member list)"
}
ETCD_SIZE=$(kubectl -n "$NAMESPACE" get statefulset "$ETCD_POD" -o jsonpath='{.spec.volumeClaimTemplates[0].spec.resources.requests.storage}')
make_etcd_volume 1
make_etcd_volume 2
# A learner is never Ready (etcd's /readyz fails its non_learner check), so these upgrades cannot --wait: the
# StatefulSet makes the new member, it starts as a learner, it is promoted, and only then does the rollout (which
# also restarts the existing members: their --initial-cluster flag names the new one) go on.
etcd_rolled() { kubectl -n "$NAMESPACE" rollout status "statefulset/$ETCD_POD" --timeout=180s >&2; }
add_learner "$ETCD_POD-1"
helm upgrade "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" --reset-then-reuse-values \
  --set etcd.replicas=2 --set etcd.initialClusterState=existing >&2 || die "helm upgrade to 2 etcd members failed"
wait_for 120 "$ETCD_POD-1 started" member_started "$ETCD_POD-1" || die "member $ETCD_POD-1 did not start: $(etcdctl member list)"
promote "$ETCD_POD-1"
etcd_rolled || die "the etcd StatefulSet did not finish its rollout to 2 members"
add_learner "$ETCD_POD-2"
helm upgrade "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" --reset-then-reuse-values \
  -f "$REPO_ROOT/charts/tokenvault/values-ha.yaml" -f "$E2E_HACK/values-small-node.yaml" \
  --set etcd.initialClusterState=existing --set "etcd.persistence.size=$ETCD_SIZE" >&2 ||
  die "helm upgrade with values-ha.yaml failed"
wait_for 120 "$ETCD_POD-2 started" member_started "$ETCD_POD-2" || die "member $ETCD_POD-2 did not start: $(etcdctl member list)"
promote "$ETCD_POD-2"
etcd_rolled || { kubectl -n "$NAMESPACE" get pods -o wide >&2; die "the etcd StatefulSet did not finish its rollout to 3 members"; }
for deployment in $(kubectl -n "$NAMESPACE" get deployment -l "app.kubernetes.io/instance=$RELEASE" -o name); do
  kubectl -n "$NAMESPACE" rollout status "$deployment" --timeout=180s >&2 || die "$deployment did not roll out with values-ha.yaml"
done
status=$(etcdctl endpoint status --cluster -w json) || die "etcdctl endpoint status failed"
members=$(echo "$status" | node -e 'const s = JSON.parse(require("fs").readFileSync(0, "utf8")); const leaders = new Set(s.map((m) => m.Status.leader)); console.log(`${s.length} ${leaders.size} ${s.filter((m) => m.Status.isLearner).length}`)')
[[ $members == "3 1 0" ]] || die "expected 3 voting members agreeing on one leader, got (members leaders learners) $members"
all_pods_ready
for acknowledged in fault-api fault-worker fault-etcd rolling-restart; do
  client verify "$BASE" "$KEY" "$WORK/$acknowledged.json" >&2 || die "tokens acknowledged in step $acknowledged were lost going to 3 members"
done
note "3 voting members, one leader; every token acknowledged earlier reads back"
delete_member() { kubectl -n "$NAMESPACE" delete pod "$ETCD_POD-1" --wait=true >&2; }
under_load "$LOAD_SECONDS" ha-etcd-member delete_member
check_load "$WORK/ha-etcd-member.json" "one of 3 etcd members deleted" yes
all_pods_ready

step "etcd maintenance: the snapshot and defragmentation CronJobs run; the snapshot holds no key"
# Each CronJob run once now (kubectl create job --from), against the three members. The snapshot lands on the backup
# claim's volume; the key-encryption key (Secret <release>-kek) must not be in it: the jobs never mount it.
run_cronjob() {
  local cronjob=$RELEASE-etcd-$1 job=e2e-$1
  kubectl -n "$NAMESPACE" delete job "$job" --ignore-not-found >/dev/null
  kubectl -n "$NAMESPACE" create job "$job" --from="cronjob/$cronjob" >&2 || die "no CronJob $cronjob"
  kubectl -n "$NAMESPACE" wait --for=condition=Complete "job/$job" --timeout=120s >&2 ||
    { kubectl -n "$NAMESPACE" logs "job/$job" >&2 || true; die "the $cronjob job did not complete"; }
  kubectl -n "$NAMESPACE" logs "job/$job" 2>/dev/null | tail -n 2 >&2 || true
}
run_cronjob backup
ETCD_SNAPSHOT=$E2E_DIR/volumes/etcd-backup/etcd-snapshot.db
[[ -s $ETCD_SNAPSHOT ]] || die "the backup job completed but $ETCD_SNAPSHOT is missing or empty"
kubectl -n "$NAMESPACE" get secret "$RELEASE-kek" -o jsonpath='{.data}' |
  node -e '
    const fs = require("fs");
    const data = JSON.parse(fs.readFileSync(0, "utf8"));
    const snapshot = fs.readFileSync(process.argv[1]);
    for (const value of Object.values(data)) {
      const text = Buffer.from(value, "base64").toString("utf8");
      for (const line of text.split("\n").filter(Boolean)) {
        for (const needle of [Buffer.from(line), Buffer.from(line, "base64")]) {
          if (needle.length >= 16 && snapshot.includes(needle)) { console.error("the KEK is in the snapshot"); process.exit(1); }
        }
      }
    }' "$ETCD_SNAPSHOT" || die "the etcd snapshot contains the key-encryption key"
note "snapshot of $(du -h "$ETCD_SNAPSHOT" | cut -f1) on the backup volume, without the key-encryption key"
run_cronjob defrag
note "defragmentation of the three members completed"

snapshot

step "helm uninstall keeps the CRDs, the custom resources and the key Secrets"
helm uninstall "$RELEASE" -n "$NAMESPACE" --wait --timeout 2m >&2 || die "helm uninstall failed"
for crd in tenants applications reactorformulas reactors proxies; do
  kubectl get crd "$crd.tokenvault.dev" >/dev/null || die "helm uninstall removed the CRD $crd.tokenvault.dev"
done
kubectl -n "$NAMESPACE" get tenant acme >/dev/null || die "helm uninstall removed the Tenant acme"
kubectl -n "$NAMESPACE" get secret "$RELEASE-kek" >/dev/null || die "helm uninstall removed the key-encryption key Secret"
fi # the etcd phase

if [[ $PHASES == *" postgres "* ]]; then
  # shellcheck source=hack/e2e/scenario-postgres.sh
  source "$E2E_HACK/scenario-postgres.sh"
fi

step ""
log "scenario passed"
