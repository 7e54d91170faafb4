// A bounded cache that every tenant of a process shares, where no tenant's entries push out
// another's while it holds more than that other: when full, the entry that goes is the oldest of
// the tenant holding the most. A tenant cycling through more entries than the cache holds (a
// thousand event types, one job each) then evicts its own, and the others keep theirs.

export class TenantCache<V> {
  readonly #tenants = new Map<string, Map<string, V>>();
  #size = 0;
  /** The most entries held, all tenants together. */
  readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Entries held, all tenants together. */
  get size(): number {
    return this.#size;
  }

  get(tenant: string, key: string): V | undefined {
    return this.#tenants.get(tenant)?.get(key);
  }

  /** Sets the entry, as the tenant's newest; when the cache is full, the oldest entry of the tenant holding the most goes first. */
  set(tenant: string, key: string, value: V): void {
    this.delete(tenant, key);
    if (this.#size >= this.capacity) this.#evict();
    let entries = this.#tenants.get(tenant);
    if (!entries) this.#tenants.set(tenant, entries = new Map());
    entries.set(key, value);
    this.#size += 1;
  }

  delete(tenant: string, key: string): void {
    const entries = this.#tenants.get(tenant);
    if (!entries?.delete(key)) return;
    this.#size -= 1;
    if (entries.size === 0) this.#tenants.delete(tenant);
  }

  #evict(): void {
    let largest: [string, Map<string, V>] | undefined;
    for (const entry of this.#tenants) if (!largest || entry[1].size > largest[1].size) largest = entry;
    if (!largest) return;
    const [tenant, entries] = largest;
    this.delete(tenant, entries.keys().next().value as string);
  }
}
