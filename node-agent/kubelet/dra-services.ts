/**
 * The kubelet's DRA plugin API (v1 and v1beta1) and plugin registration API, loaded from our .proto
 * files with their exact package names (`k8s.io.kubelet.pkg.apis.dra.v1`, `pluginregistration`):
 * the kubelet calls services by full name. Same loader options as grpc-services.ts.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { loaderOptions } from './grpc-services.js';

const protoDir = join(dirname(fileURLToPath(import.meta.url)), 'proto');

type ServiceCtor = grpc.ServiceClientConstructor;
type DraPackage = { DRAPlugin: ServiceCtor };

function loadDra(version: 'v1' | 'v1beta1'): ServiceCtor {
  const definition = protoLoader.loadSync(join(protoDir, `dra-${version}.proto`), loaderOptions);
  const root = grpc.loadPackageDefinition(definition) as unknown as {
    k8s: { io: { kubelet: { pkg: { apis: { dra: Record<string, DraPackage> } } } } };
  };
  return (root.k8s.io.kubelet.pkg.apis.dra[version] as DraPackage).DRAPlugin;
}

const registration = grpc.loadPackageDefinition(
  protoLoader.loadSync(join(protoDir, 'pluginregistration-v1.proto'), loaderOptions),
) as unknown as { pluginregistration: { Registration: ServiceCtor } };

export const DraPluginV1Service = loadDra('v1');
export const DraPluginV1beta1Service = loadDra('v1beta1');
export const PluginRegistrationService = registration.pluginregistration.Registration;
