/**
 * The key, in a message's or part's provider `options`, under which the
 * built-in middleware mark what they changed (`{ "stepwise": { … } }`).
 * Providers read only their own key, so a marker never reaches a model.
 */
export const markerKey = "stepwise"
