import { invalidParameter } from '../vendor-api-errors.ts';
import type { DeviceRecord } from './admin-records.ts';
import type { AdminState, EventClient } from './admin-state.ts';
import type { CallbackDelivery } from './callback-delivery.ts';
import { addDevice } from './devices.ts';

/**
 * Automatic account recovery: each named enrolled device is replaced by a new one (migrated_*
 * fields on both), and one accounts-migration callback per migrated account goes out.
 */
export async function migrate(
  s: AdminState,
  target: { device_id?: string; user_id?: string },
  client: EventClient,
): Promise<Record<string, unknown>> {
  let devices: DeviceRecord[];
  if (target.device_id !== undefined) {
    const d = s.activeDevice(target.device_id);
    if (!d.enrolled) throw invalidParameter('device_id', 'device is not enrolled');
    s.activeUser(d.user_id);
    devices = [d];
  } else {
    s.activeUser(target.user_id ?? '');
    devices = s.enrolledDevices(target.user_id!);
    if (devices.length === 0) throw invalidParameter('user_id', 'user has no enrolled device to migrate');
  }
  const now = s.nowSec();
  const migrations: Record<string, unknown>[] = [];
  const callbacks: CallbackDelivery[] = [];
  for (const old of devices) {
    const fresh = addDevice(s, old.user_id, {
      type: old.type,
      enrolled: true,
      display_name: old.display_name,
      ...(old.number === undefined ? {} : { number: old.number }),
      ...(old.version === undefined ? {} : { version: old.version }),
      account_recovery_flow_binding_enabled: old.account_recovery_flow_binding_enabled ?? false,
      migrated_from_device_id: old.device_id,
      migrated_at: now,
    });
    old.migrated_to_device_id = fresh.device_id;
    old.migrated_at = now;
    old.enrolled = false;
    old.archived_at = now;
    old.updated_at = now;
    s.emitDeviceCreated(fresh, client);
    s.emitDeviceUpdated(old, client);
    const migration = {
      user_id: old.user_id,
      device_id: old.device_id,
      migrated_to_device_id: fresh.device_id,
      migrated_at: now,
    };
    migrations.push(migration);
  }
  const url = s.info.accounts_migration_callback_url;
  if (url !== undefined) {
    for (const m of migrations) callbacks.push(await s.callbacks.send('accounts_migration', url, m));
  }
  return { migrations, callbacks };
}
