import type { GeoPoint } from './observation.ts';

/** Mean Earth radius used by the geovelocity signal, km. */
export const EARTH_RADIUS_KM = 6371;

/** Great-circle (haversine) distance between two points, km, unrounded. */
export function haversineKm(a: GeoPoint, b: GeoPoint): number {
  const rad = Math.PI / 180;
  const dLat = (b.lat - a.lat) * rad;
  const dLon = (b.lon - a.lon) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Rounds to one decimal (the API's km and km/h precision). */
export function roundOneDecimal(x: number): number {
  return Math.round(x * 10) / 10;
}
