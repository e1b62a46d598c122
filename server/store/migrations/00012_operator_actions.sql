-- Console actions (issue 51): an operator cancels a job, drains a device or
-- revokes it, and the journal says which operator did it.
--
-- job_events gains the actor 'operator' and operator_id, which names the
-- operator on exactly the rows an operator caused (the CHECK holds it
-- whatever writes the row). Device actions have no job to journal against,
-- so device_events keeps them: who (an operator, or `rendermac admin`),
-- what (drain, revoke) and when. devices.drain_requested_at is a drain not
-- yet delivered: the gateway holding the device's session sends it the
-- drain frame and clears it; a device not connected gets it after its next
-- hello (SPEC section 5, "drain").

-- +goose Up

ALTER TABLE job_events DROP CONSTRAINT job_events_actor_check;
ALTER TABLE job_events ADD COLUMN operator_id uuid REFERENCES operators (id);
ALTER TABLE job_events ADD CONSTRAINT job_events_actor_check
    CHECK (actor IN ('buyer', 'matcher', 'device', 'verifier', 'sweeper', 'operator'));
ALTER TABLE job_events ADD CONSTRAINT job_events_operator_named
    CHECK ((actor = 'operator') = (operator_id IS NOT NULL));

ALTER TABLE devices ADD COLUMN drain_requested_at timestamptz;

CREATE TABLE device_events (
    id          bigserial   PRIMARY KEY,
    device_id   uuid        NOT NULL REFERENCES devices (id),
    action      text        NOT NULL CHECK (action IN ('drain', 'revoke')),
    actor       text        NOT NULL CHECK (actor IN ('operator', 'admin')),
    operator_id uuid        REFERENCES operators (id),
    at          timestamptz NOT NULL,
    CHECK ((actor = 'operator') = (operator_id IS NOT NULL))
);

CREATE INDEX device_events_device_idx ON device_events (device_id, id);

-- +goose Down

DROP TABLE device_events;
ALTER TABLE devices DROP COLUMN drain_requested_at;
ALTER TABLE job_events DROP CONSTRAINT job_events_operator_named;
ALTER TABLE job_events DROP COLUMN operator_id;
ALTER TABLE job_events DROP CONSTRAINT job_events_actor_check;
ALTER TABLE job_events ADD CONSTRAINT job_events_actor_check
    CHECK (actor IN ('buyer', 'matcher', 'device', 'verifier', 'sweeper'));
