/**
 * Kubernetes' protobuf encoding, for the request bodies kubectl sends that way: imperative
 * `kubectl create namespace|configmap|secret` use typed clients whose default content type is
 * `application/vnd.kubernetes.protobuf`, and a real API server accepts it. A body is the magic
 * `k8s\0` then a `runtime.Unknown` envelope whose `raw` field is the object itself.
 *
 * Only the kinds kubectl creates this way are described (`create deployment` and `create job` too,
 * with the pod template fields those commands set), with the field numbers of k8s.io/api's and
 * apimachinery's generated.proto; anything else is refused with 415, as a server that cannot
 * decode a media type answers.
 */
import protobuf from 'protobufjs';

export const PROTOBUF_CONTENT_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

const SCHEMA = `
syntax = "proto2";
message TypeMeta { optional string apiVersion = 1; optional string kind = 2; }
message Unknown { optional TypeMeta typeMeta = 1; optional bytes raw = 2; optional string contentEncoding = 3; optional string contentType = 4; }
message Time { optional int64 seconds = 1; optional int32 nanos = 2; }
message OwnerReference { optional string kind = 1; optional string name = 3; optional string uid = 4; optional string apiVersion = 5; optional bool controller = 6; optional bool blockOwnerDeletion = 7; }
message ObjectMeta {
  optional string name = 1; optional string generateName = 2; optional string namespace = 3;
  optional string uid = 5; optional string resourceVersion = 6;
  map<string, string> labels = 11; map<string, string> annotations = 12;
  repeated OwnerReference ownerReferences = 13; repeated string finalizers = 14;
}
message NamespaceSpec { repeated string finalizers = 1; }
message Namespace { optional ObjectMeta metadata = 1; optional NamespaceSpec spec = 2; }
message ConfigMap { optional ObjectMeta metadata = 1; map<string, string> data = 2; map<string, bytes> binaryData = 3; optional bool immutable = 4; }
message Secret { optional ObjectMeta metadata = 1; map<string, bytes> data = 2; optional string type = 3; map<string, string> stringData = 4; optional bool immutable = 5; }
message Quantity { optional string string = 1; }
message LabelSelectorRequirement { optional string key = 1; optional string operator = 2; repeated string values = 3; }
message LabelSelector { map<string, string> matchLabels = 1; repeated LabelSelectorRequirement matchExpressions = 2; }
message ContainerPort { optional string name = 1; optional int32 hostPort = 2; optional int32 containerPort = 3; optional string protocol = 4; }
message EnvVar { optional string name = 1; optional string value = 2; }
message ResourceRequirements { map<string, Quantity> limits = 1; map<string, Quantity> requests = 2; }
message Container {
  optional string name = 1; optional string image = 2; repeated string command = 3; repeated string args = 4;
  optional string workingDir = 5; repeated ContainerPort ports = 6; repeated EnvVar env = 7;
  optional ResourceRequirements resources = 8; optional string imagePullPolicy = 14;
}
message PodSpec {
  repeated Container containers = 2; optional string restartPolicy = 3; optional int64 terminationGracePeriodSeconds = 4;
  map<string, string> nodeSelector = 7; optional string serviceAccountName = 8; optional string schedulerName = 19;
}
message PodTemplateSpec { optional ObjectMeta metadata = 1; optional PodSpec spec = 2; }
message IntOrString { optional int64 type = 1; optional int32 intVal = 2; optional string strVal = 3; }
message RollingUpdateDeployment { optional IntOrString maxUnavailable = 1; optional IntOrString maxSurge = 2; }
message DeploymentStrategy { optional string type = 1; optional RollingUpdateDeployment rollingUpdate = 2; }
message DeploymentSpec {
  optional int32 replicas = 1; optional LabelSelector selector = 2; optional PodTemplateSpec template = 3;
  optional DeploymentStrategy strategy = 4; optional int32 minReadySeconds = 5; optional int32 revisionHistoryLimit = 6;
  optional bool paused = 7; optional int32 progressDeadlineSeconds = 9;
}
message Deployment { optional ObjectMeta metadata = 1; optional DeploymentSpec spec = 2; }
message JobSpec {
  optional int32 parallelism = 1; optional int32 completions = 2; optional int64 activeDeadlineSeconds = 3;
  optional LabelSelector selector = 4; optional bool manualSelector = 5; optional PodTemplateSpec template = 6;
  optional int32 backoffLimit = 7; optional int32 ttlSecondsAfterFinished = 8; optional string completionMode = 9;
  optional bool suspend = 10;
}
message Job { optional ObjectMeta metadata = 1; optional JobSpec spec = 2; }
`;

const root = protobuf.parse(SCHEMA, { keepCase: true }).root;
const envelope = root.lookupType('Unknown');
const KINDS: Record<string, protobuf.Type> = {
  'v1/Namespace': root.lookupType('Namespace'),
  'v1/ConfigMap': root.lookupType('ConfigMap'),
  'v1/Secret': root.lookupType('Secret'),
  'apps/v1/Deployment': root.lookupType('Deployment'),
  'batch/v1/Job': root.lookupType('Job'),
};

export class UnsupportedProtobuf extends Error {}

/** The object a protobuf body carries, as the JSON a client would have sent. */
export function decodeProtobufBody(body: Buffer): Record<string, unknown> {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC))
    throw new UnsupportedProtobuf('the body does not start with the k8s protobuf magic');
  const unknown = envelope.toObject(envelope.decode(body.subarray(MAGIC.length)), { defaults: false }) as {
    typeMeta?: { apiVersion?: string; kind?: string };
    raw?: Uint8Array;
  };
  const apiVersion = unknown.typeMeta?.apiVersion ?? '';
  const kind = unknown.typeMeta?.kind ?? '';
  const type = KINDS[`${apiVersion}/${kind}`];
  if (!type) throw new UnsupportedProtobuf(`protobuf bodies of ${apiVersion} ${kind} are not supported; send JSON`);
  // bytes as base64 strings and int64 as numbers: exactly the object's JSON form.
  const object = type.toObject(type.decode(unknown.raw ?? new Uint8Array()), {
    bytes: String,
    longs: Number,
    defaults: false,
  });
  const json = { apiVersion, kind, ...object };
  // ConfigMap and Secret bodies are maps, where an empty string is a value.
  return (apiVersion === 'v1' ? json : withPlainValues(withoutEmptyStrings(json) as Decoded)) as Record<
    string,
    unknown
  >;
}

/**
 * Go's protobuf encoder writes every non-pointer string, empty or not, where its JSON encoder
 * leaves empty ones out (`omitempty`): an empty string is an absent field.
 */
function withoutEmptyStrings(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutEmptyStrings);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== '')
      .map(([k, v]) => [k, STRING_MAPS.has(k) ? v : withoutEmptyStrings(v)]),
  );
}

/** Fields that are maps of strings: an empty value there is a value. */
const STRING_MAPS = new Set(['labels', 'annotations', 'nodeSelector', 'matchLabels']);

type Containers = { resources?: Record<string, Record<string, { string?: string }> | undefined> }[];
type Decoded = {
  spec?: {
    template?: { spec?: { containers?: Containers } };
    strategy?: { rollingUpdate?: Record<string, { type?: number; intVal?: number; strVal?: string }> };
  };
};

/**
 * The object with its Quantity (`{string: "1"}`) and IntOrString (`{type, intVal|strVal}`)
 * messages as JSON writes them: `"1"`, `1` or `"25%"`.
 */
function withPlainValues(obj: Decoded): Decoded {
  for (const c of obj.spec?.template?.spec?.containers ?? []) {
    for (const [key, list] of Object.entries(c.resources ?? {})) {
      c.resources![key] = Object.fromEntries(Object.entries(list ?? {}).map(([k, q]) => [k, q.string ?? '0'])) as never;
    }
  }
  const rolling = obj.spec?.strategy?.rollingUpdate ?? {};
  for (const [k, v] of Object.entries(rolling)) {
    rolling[k] = (v.type === 1 ? (v.strVal ?? '') : (v.intVal ?? 0)) as never;
  }
  return obj;
}
