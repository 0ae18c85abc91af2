# shellcheck shell=bash
# The PostgreSQL phase of hack/e2e/scenario.sh (sourced by it after the etcd install, with its helpers): the chart
# with store.type=postgres, as a second install in a namespace of its own, on a PostgreSQL this run makes.
#   - PostgreSQL 15 (Debian's package, hack/e2e/images.sh) as a StatefulSet of one pod on a hostPath
#     PersistentVolume, behind a Service, speaking TLS only (a CA made for the run); its role and database from a
#     Secret. The chart renders a NetworkPolicy only for the database it runs itself (CloudNativePG), so this one
#     is here: port 5432 only from the release's API pods.
#   - helm install with the URL (no password in it, sslmode=verify-full), the password and the CA from Secrets
#     (store.postgres.urlSecretRef, passwordSecretRef, caSecretRef): the samples Ready, the SDKs through the Service,
#     the tokens rows of PostgreSQL, no etcd rendered.
#   - NetworkPolicy: a pod of no component cannot reach PostgreSQL; an API pod can.
#   - the PostgreSQL pod deleted under load: 503 with Retry-After while it is away, no 500 and no refused
#     connection, every acknowledged token reads back.
#   - helm upgrade with a changed value under load: the API pods replaced, every call answered, every token kept.
#   - `tokenvault audit verify` in an API pod (its store from the same Secrets).
# Leaves $NAMESPACE set to the PostgreSQL install's namespace (the failure diagnostics look there).

POSTGRES_NAMESPACE=${TOKENVAULT_E2E_POSTGRES_NAMESPACE:-tokenvault-e2e-pg}
NAMESPACE=$POSTGRES_NAMESPACE
PG=e2e-postgres
PG_HOST=$PG.$NAMESPACE.svc
API_PODS=app.kubernetes.io/component=api,app.kubernetes.io/instance=$RELEASE

step "PostgreSQL: a StatefulSet on a volume, TLS, only the API may connect"
remove_previous_namespace
kubectl create namespace "$NAMESPACE" >/dev/null
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/warn=restricted >/dev/null
make_volume postgres "data-$PG-0"

# The server's certificate names the Service (verify-full checks the host name the API connects to).
pg_tls=$WORK/postgres-tls
rm -rf "$pg_tls"
mkdir -p "$pg_tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tokenvault-e2e-postgres-ca \
  -keyout "$pg_tls/ca.key" -out "$pg_tls/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$PG_HOST" -keyout "$pg_tls/tls.key" -out "$pg_tls/tls.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s,DNS:%s.cluster.local\n' \
  "$PG_HOST" "$PG_HOST" >"$pg_tls/tls.ext"
openssl x509 -req -in "$pg_tls/tls.csr" -CA "$pg_tls/ca.crt" -CAkey "$pg_tls/ca.key" -CAcreateserial -days 2 \
  -extfile "$pg_tls/tls.ext" -out "$pg_tls/tls.crt" 2>/dev/null
kubectl -n "$NAMESPACE" create secret tls "$PG-tls" --cert="$pg_tls/tls.crt" --key="$pg_tls/tls.key" >/dev/null
kubectl -n "$NAMESPACE" create secret generic "$PG-ca" --from-file=ca.crt="$pg_tls/ca.crt" >/dev/null
# One Secret for both sides: the database's role password, and the API's URL (without the password, which the chart
# mounts as a file: TOKENVAULT_POSTGRES_PASSWORD_FILE).
kubectl -n "$NAMESPACE" create secret generic "$PG" \
  --from-literal=password="$(openssl rand -hex 24)" \
  --from-literal=url="postgres://tokenvault@$PG_HOST:5432/tokenvault?sslmode=verify-full" >/dev/null

# The first start makes the cluster in a temporary directory (initdb, then the role and the database in single-user
# mode) and moves it into place, so a pod stopped halfway starts over instead of finding a cluster without its role.
# PostgreSQL takes a key file only when no one but its user (or root) may read it: a copy, mode 0600.
kubectl -n "$NAMESPACE" create configmap "$PG-start" --from-file=start.sh=/dev/stdin >/dev/null <<'SH'
set -eu
data=/var/lib/postgresql/data/pgdata
run=/run/postgresql
if [ ! -s "$data/PG_VERSION" ]; then
  rm -rf "$data.new"
  initdb --pgdata="$data.new" --username=postgres --encoding=UTF8 --locale=C --auth=reject --no-instructions
  password=$(cat /secret/password)
  printf "CREATE ROLE tokenvault LOGIN PASSWORD '%s'\nCREATE DATABASE tokenvault OWNER tokenvault\n" "$password" |
    postgres --single -D "$data.new" postgres >/dev/null
  printf 'hostssl tokenvault tokenvault all scram-sha-256\n' >"$data.new/pg_hba.conf"
  mv "$data.new" "$data"
fi
install -m 0600 /tls/tls.key "$run/server.key"
exec postgres -D "$data" -c listen_addresses='*' -c unix_socket_directories="$run" \
  -c ssl=on -c ssl_cert_file=/tls/tls.crt -c ssl_key_file="$run/server.key" \
  -c shared_buffers=32MB -c max_connections=100
SH
kubectl -n "$NAMESPACE" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: $PG, labels: {app: $PG}}
spec:
  serviceName: $PG
  replicas: 1
  selector: {matchLabels: {app: $PG}}
  template:
    metadata: {labels: {app: $PG}}
    spec:
      automountServiceAccountToken: false
      # fsGroup: the Secrets' files are the postgres user's group's to read.
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: postgres
          image: $POSTGRES_IMAGE
          imagePullPolicy: Never
          command: [sh, /start/start.sh]
          ports: [{name: postgres, containerPort: 5432}]
          # pg_isready as the role the API uses: the server asks for its password, which is answer enough (a user
          # without a pg_hba.conf line would be refused with a FATAL in the log at every probe).
          readinessProbe:
            exec: {command: [/usr/lib/postgresql/15/bin/pg_isready, --quiet, --host=127.0.0.1, --dbname=tokenvault, --username=tokenvault]}
            periodSeconds: 2
          resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 512Mi}}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts:
            - {name: data, mountPath: /var/lib/postgresql/data}
            - {name: run, mountPath: /run/postgresql}
            - {name: start, mountPath: /start, readOnly: true}
            - {name: tls, mountPath: /tls, readOnly: true}
            - {name: secret, mountPath: /secret, readOnly: true}
      volumes:
        - {name: run, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
        - {name: start, configMap: {name: $PG-start}}
        - {name: tls, secret: {secretName: $PG-tls, defaultMode: 0440}}
        - {name: secret, secret: {secretName: $PG, items: [{key: password, path: password}], defaultMode: 0440}}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnce], storageClassName: e2e-local, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Service
metadata: {name: $PG}
spec:
  selector: {app: $PG}
  ports: [{name: postgres, port: 5432, targetPort: postgres}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: $PG}
spec:
  podSelector: {matchLabels: {app: $PG}}
  policyTypes: [Ingress]
  ingress:
    - from: [{podSelector: {matchLabels: {app.kubernetes.io/component: api, app.kubernetes.io/instance: $RELEASE}}}]
      ports: [{port: 5432, protocol: TCP}]
YAML
kubectl -n "$NAMESPACE" rollout status "statefulset/$PG" --timeout=120s >&2 ||
  { kubectl -n "$NAMESPACE" logs "$PG-0" --tail=30 >&2 || true; die "the PostgreSQL pod did not become Ready"; }

# psql SQL: a query as the tokenvault role, over TLS, from the PostgreSQL pod itself (what the API stored).
psql_query() {
  kubectl -n "$NAMESPACE" exec "$PG-0" -- sh -c 'PGPASSWORD=$(cat /secret/password) exec psql --no-psqlrc -At \
    "host=127.0.0.1 dbname=tokenvault user=tokenvault sslmode=require" -c "$1"' psql "$1"
}

step "helm install with store.type=postgres (URL, password and CA from Secrets)"
POSTGRES_VALUES=(
  --set "image.repository=${TOKENVAULT_IMAGE%:*}" --set "image.tag=${TOKENVAULT_IMAGE##*:}" --set image.pullPolicy=Never
  --set store.type=postgres
  --set "store.postgres.urlSecretRef.name=$PG" --set store.postgres.urlSecretRef.key=url
  --set "store.postgres.passwordSecretRef.name=$PG" --set store.postgres.passwordSecretRef.key=password
  --set "store.postgres.caSecretRef.name=$PG-ca" --set store.postgres.caSecretRef.key=ca.crt
  # As the etcd install: fixed replica counts (no metrics-server), the per-key limits out of the load's way.
  --set api.autoscaling.enabled=false --set api.replicas=2
  --set api.rateLimits.apiPerKey=20000 --set api.rateLimits.callsPerKey=20000
)
helm install "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" "${POSTGRES_VALUES[@]}" --wait --timeout 5m >&2 ||
  die "helm install with store.type=postgres did not complete"
all_pods_ready
[[ -z $(kubectl -n "$NAMESPACE" get statefulset,cronjob -l app.kubernetes.io/component=etcd -o name) ]] ||
  die "store.type=postgres rendered etcd objects"
kubectl -n "$NAMESPACE" get pods >&2

step "PostgreSQL install: samples Ready, SDKs through the Service, tokens in PostgreSQL"
kubectl apply -n "$NAMESPACE" -k "$REPO_ROOT/config/samples" >&2
for kind in tenants applications reactorformulas reactors proxies; do
  kubectl -n "$NAMESPACE" wait --for=condition=Ready "$kind" --all --timeout=120s >&2 ||
    { kubectl -n "$NAMESPACE" get "$kind" -o yaml >&2; die "the sample $kind are not Ready on PostgreSQL"; }
done
wait_for 30 "Secret backend-key" kubectl -n "$NAMESPACE" get secret backend-key ||
  die "the controller did not write the application key into Secret backend-key"
KEY=$(kubectl -n "$NAMESPACE" get secret backend-key -o jsonpath='{.data.key}' | base64 -d)
REACTOR_ID=$(kubectl -n "$NAMESPACE" get reactor card-summary -o jsonpath='{.status.id}')
[[ -n $KEY && -n $REACTOR_ID ]] || die "no application key or reactor id on the PostgreSQL install"
BASE=$(api_url)
rows_before=$(psql_query 'SELECT count(*) FROM tokenvault_kv') || die "could not query PostgreSQL as the tokenvault role"
client smoke "$BASE" "$KEY" "$REACTOR_ID" >&2 || die "the SDK smoke test through $BASE (PostgreSQL install) failed"
rows_after=$(psql_query 'SELECT count(*) FROM tokenvault_kv')
((rows_after > rows_before)) || die "a token was created but PostgreSQL's tokenvault_kv did not grow ($rows_before, then $rows_after rows)"
note "SDK smoke on PostgreSQL; tokenvault_kv $rows_before -> $rows_after rows"

step "NetworkPolicy on PostgreSQL: only the API pods reach 5432"
PG_AT=$(pod_ip "app=$PG"):5432
API_AT=$(pod_ip "$API_PODS"):8080
[[ $PG_AT != :* && $API_AT != :* ]] || die "could not find the pod addresses (PostgreSQL $PG_AT, API $API_AT)"
make_probe_pod
expect_probe e2e-probe "a pod of no component" "$API_AT" "$PG_AT"
out=$(probe "$(pod_name "$API_PODS")" "$PG_AT") || die "could not run the probe in an API pod"
[[ $out == "$PG_AT open" ]] || die "an API pod cannot reach PostgreSQL: $out"
note "an API pod: $PG_AT open"
kubectl -n "$NAMESPACE" delete pod e2e-probe --wait=false >/dev/null

step "fault: the PostgreSQL pod deleted under load"
# Deleted, the pod stops at once (the image's stop signal is SIGINT, PostgreSQL's fast shutdown) and the StatefulSet
# starts it again on its volume: meanwhile calls answer 503 with Retry-After (the API pods stay Ready, ADR 0007).
delete_postgres() {
  log "deleting pod/$PG-0"
  kubectl -n "$NAMESPACE" delete pod "$PG-0" --wait=false >&2
  sleep 8
}
under_load "$LOAD_SECONDS" pg-fault delete_postgres
check_load "$WORK/pg-fault.json" "PostgreSQL pod deleted" yes
all_pods_ready

step "helm upgrade of the PostgreSQL install under load: API pods replaced"
old_api_pods=$(kubectl -n "$NAMESPACE" get pods -l "$API_PODS" -o jsonpath='{.items[*].metadata.name}')
upgrade_postgres() {
  helm upgrade "$RELEASE" "$REPO_ROOT/charts/tokenvault" -n "$NAMESPACE" "${POSTGRES_VALUES[@]}" \
    --set config.logLevel=debug --wait --timeout 5m >&2 ||
    { kubectl -n "$NAMESPACE" get pods -o wide >&2; die "helm upgrade of the PostgreSQL install did not complete"; }
}
# The load lasts about as long as the rollout takes here (about a minute), so every API pod is replaced under it.
under_load $((LOAD_SECONDS + 30)) pg-upgrade upgrade_postgres
check_load "$WORK/pg-upgrade.json" "helm upgrade (PostgreSQL)" no
all_pods_ready
for pod in $old_api_pods; do
  kubectl -n "$NAMESPACE" get pod "$pod" >/dev/null 2>&1 && die "helm upgrade left the API pod $pod in place: it rolled nothing"
done
client verify "$BASE" "$KEY" "$WORK/pg-fault.json" >&2 || die "tokens acknowledged before the upgrade were lost across it"
client smoke "$BASE" "$KEY" "$REACTOR_ID" >&2 || die "the API does not answer after the upgrade (PostgreSQL install)"
note "API pods $old_api_pods replaced; every token acknowledged before reads back"

step "audit verify on PostgreSQL (an API pod's environment: URL, password and CA files)"
for attempt in 1 2 3; do
  status=0
  out=$(kubectl -n "$NAMESPACE" exec "$(pod_name "$API_PODS")" -- node --no-node-snapshot dist/cli.js audit verify 2>&1) ||
    status=$?
  [[ $out == *"tenants checked"* ]] && break
  sleep 5
done
((status == 0)) || die "tokenvault audit verify (PostgreSQL): exit $status: $(echo "$out" | grep -v 'chain intact' | tail -n 5)"
note "$(echo "$out" | tail -n 1)"

snapshot "$POSTGRES_SNAPSHOT"
