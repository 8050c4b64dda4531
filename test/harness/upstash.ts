// The upstash backend's keys in Redis, for tests that read them back with the official client.
/** The key of lock `name`: the hash tag keeps a lock's keys in one cluster slot. */
export const lockKey = (name: string): string => `leasehold:{${name}}`;
/** The key of lock `name`'s fencing counter. */
export const fenceKey = (name: string): string => `leasehold:{${name}}:fence`;
