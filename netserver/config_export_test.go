package netserver

// Resolve is c as New runs it, validated, or New's configuration error.
func Resolve(c Config) (Config, error) {
	err := c.validate()
	return c, err
}
